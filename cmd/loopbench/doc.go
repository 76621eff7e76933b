// Command loopbench measures loopbot in one process against its fakes: the scripted
// OpenAI-compatible server of agent/llm/llmtest, the real bbolt store in a temporary
// directory, a recording chat platform, and the real loopbot binary where a figure is about
// the process. It exists so that a change to the loop, the
// context management or the outbox shows up as a number before it shows up in a thread.
//
// Usage:
//
//	go run ./cmd/loopbench [-scenarios=step,prompt,chat,makespan,startup] [-step-runs=N] [-step-steps=N]
//	                       [-prompt-steps=N] [-output-kb=N] [-chat-steps=N] [-chat-latency=D]
//	                       [-makespan-runs=N] [-makespan-steps=N] [-makespan-latency=D]
//	                       [-startup-runs=N] [-idle=D] [-loopbot=PATH] [-cpuprofile=FILE]
//
// Each scenario measures one or more figures. loopbench prints them as a table, one row per
// figure with a note on how it was measured, and then, as its last line, one JSON object
// holding every figure by key, so a script can read the output with tail -n 1.
//
// The scenarios:
//
//	step    step_overhead_us: the median wall time of one loop step with an instant
//	        in-process model and tool, checkpoint to the real store included.
//	prompt  prompt_token_ratio: prompt tokens sent over HTTP by a long tool-heavy run with
//	        context management, divided by those of the same run keeping full history.
//	chat    chat_calls and max_edits_per_s: platform calls made by the real bot for a run
//	        of many slow model steps, and the most edits to one channel in any second.
//	makespan makespan_ratio and peak_rss_mb: many runs started at once against a slow
//	        model, through the real bot, store and model client; the time until the last
//	        completed over steps x latency, and the process's peak RSS during the scenario.
//	startup startup_ms and idle_rss_mb: the real binary (built from this module unless
//	        -loopbot names one) from exec to its first 200 from /healthz, median of several
//	        starts, and its RSS after sitting idle with its store and web console open.
//
// A scenario is one entry of the scenarios table in main.go: a name for -scenarios and a
// function that returns its figures, so adding one touches nothing else.
package main
