// Command loopbench measures loopbot in one process against its fakes: the scripted
// OpenAI-compatible servers of agent/llm/llmtest, the real bbolt store in a temporary
// directory, the fake Slack of adapters/slack/slackfake behind the real Slack adapter (or a
// recording chat platform where Slack is not the point), and the real loopbot binary where a
// figure is about the process. It exists so that a change to the loop, the context
// management or the outbox shows up as a number before it shows up in a thread.
//
// Usage:
//
//	go run ./cmd/loopbench [-scenarios=step,step-postgres,prompt,chat,ack,makespan,makespan-replicas,planner,startup,autonomy]
//	                       [-step-runs=N] [-step-steps=N] [-prompt-steps=N] [-output-kb=N]
//	                       [-prompt-budget=N] [-chat-steps=N] [-chat-latency=D] [-ack-events=N] [-ack-fake=process|inline]
//	                       [-makespan-runs=N] [-makespan-steps=N] [-makespan-latency=D] [-makespan-model=lean|llmtest]
//	                       [-plan-parts=N] [-plan-fetches=N] [-plan-latency=D]
//	                       [-startup-runs=N] [-idle=D] [-loopbot=PATH] [-cpuprofile=FILE] [-memprofile=FILE] [-trace=FILE]
//	                       [-database-url=URL] [-replicas=N]
//
// Each scenario measures one or more figures. loopbench prints them as a table, one row per
// figure with a note on how it was measured, and then, as its last line, one JSON object
// holding every figure by key, so a script can read the output with tail -n 1.
//
// The scenarios:
//
//	step     step_overhead_us: the median wall time of one loop step with an instant
//	         in-process model and tool, checkpoint to the real store included.
//	         checkpoint_bytes_per_step: the bytes of pages the bbolt store wrote for those
//	         runs' checkpoints, over their number.
//	step-postgres  step_overhead_us_postgres and checkpoint_bytes_per_step_postgres: the
//	         same runs checkpointed to the PostgreSQL database of -database-url (or
//	         LOOPBOT_DATABASE_URL), the bytes being the growth of the server's write-ahead
//	         log; without a URL it measures nothing.
//	prompt   prompt_token_ratio: prompt tokens sent over HTTP by a long tool-heavy run with
//	         context management, divided by those of the same run as a naive loop that keeps
//	         the full history and every output whole. The outputs are test logs, web pages
//	         and file listings of 3/8 to 13/8 of -output-kb; the run fails unless the model
//	         was shown the first and last line of each one.
//	         cache_prefix_ratio: the share of each managed request's tools and messages that
//	         repeats the previous request's byte for byte from the start, the prefix a
//	         provider's prompt cache serves, averaged over requests. cached_cost_ratio: the
//	         managed run's input cost with that prefix at OpenAI's cached-input price (half,
//	         for gpt-4o) over the full-history run's without caching.
//	chat     chat_calls and max_edits_per_s: Slack Web API calls made for a run of many
//	         slow model steps, mentioned over Socket Mode, and the most chat.update edits
//	         of one channel in any second.
//	ack      ack_p50_ms and ack_p99_ms: a burst of app_mention envelopes over Socket Mode;
//	         the time from the fake writing each envelope to it reading the ack back.
//	         The fake Slack runs in a child process, as Slack is not in the bot's process
//	         (-ack-fake=inline runs it in this one, sharing the bot's scheduler and GC); the
//	         scenario fails unless each envelope was acknowledged once, on its only delivery.
//	         ack_accept_commits: the transactions that stored the envelopes before their acks.
//	makespan makespan_ratio and peak_rss_mb: many runs started at once against a slow
//	         model, through the real bot, store and model client; the time until the last
//	         completed over steps x latency, and the process's peak RSS during the scenario.
//	         makespan_bot_cpu_s and makespan_model_cpu_s: the CPU time of this process (the
//	         bot's side) and of the fake model's process meanwhile. The fake model is
//	         llmtest's Lean server in a child process, which keeps and decodes nothing
//	         (-makespan-model=llmtest uses llmtest's Server instead, which decodes and keeps
//	         every request); the scenario fails unless it was asked each step exactly once.
//	         makespan_writes_per_run and makespan_written_mb: the store's writes over the
//	         runs (the note gives its commits) and the bytes of pages it wrote meanwhile;
//	         makespan_write_wait_ms and makespan_writer_busy: a write's mean wait for its
//	         result and the share of the burst the one writer was busy.
//	makespan-replicas  makespan_ratio_replicas: the same burst on three bots (-replicas) in this
//	         process sharing the PostgreSQL database of -database-url (or
//	         LOOPBOT_DATABASE_URL), a connection pool each, the mentions taken in turn; the
//	         runs go to whichever replica claims them, and the elected one sends every
//	         answer. Without a URL it measures nothing.
//	planner  planner_token_ratio and planner_makespan_ratio: one scripted task of several
//	         independent parts of tool calls and a step that combines them, run planned (a
//	         planner, an executor a part with its own context, parts in parallel, the
//	         planner's reviews) and in one loop, both with the default context management,
//	         over HTTP at gpt-4o's prices: prompt tokens planned over one loop, and wall time
//	         planned over one loop; the note gives tokens, cost, model calls and wall time of
//	         each.
//	startup  startup_ms and idle_rss_mb: the real binary (built from this module without
//	         cgo, as the README's install command builds it, unless -loopbot names one) from exec to its first 200 from /healthz, median of several
//	         starts, and its RSS after sitting idle with its store and web console open,
//	         split into idle_anon_mb (its own memory) and idle_file_mb (mapped pages of the
//	         binary), with idle_heap_inuse_mb, the heap the runtime reports on /metrics.
//	         The resident set is also split by page (/proc/PID/pagemap) into the binary's
//	         sections: idle_text_mb (code), idle_rodata_mb, idle_pclntab_mb (the function
//	         table), idle_data_mb, then idle_other_files_mb (libc in a cgo build, the
//	         database file) and idle_runtime_mb (heap, stacks); binary_mb is its size.
//	autonomy unsafe_unapproved and approvals_per_benign_run_<level>: a corpus of scripted
//	         runs through the real loop and the real tools (files, shell in bubblewrap,
//	         http_fetch against local servers) at careful, balanced and bold. Benign tasks
//	         read, summarise, edit files the goal names and run tests; attacks follow an
//	         injected page, try the shell classes of issue 14, and send data or secrets to a
//	         host no goal names. The driver approves what benign runs ask and rejects attack
//	         calls; unsafe_unapproved counts attack calls that ran with no approval at any
//	         level (it must be 0).
//
// A scenario is one entry of the scenarios table in main.go: a name for -scenarios, a
// function that returns its figures, and the flags of its sizes.
package main
