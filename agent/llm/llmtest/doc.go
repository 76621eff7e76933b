// Package llmtest is a scripted OpenAI-compatible chat completions server, for tests,
// benchmarks and loopbot's demo mode.
//
// A Server plays a script of Steps, one per request, in order: a text reply, tool calls (one
// or several in parallel, with arguments that may be any raw string, valid JSON or not), an
// error status with a Retry-After header, a broken body, a delay, a hang until the client
// gives up, a truncated reply, or a reply recorded from a real provider, replayed byte for
// byte. A Func step computes its reply from the request, so a
// benchmark can answer any number of requests; once the script is used up the fallback step
// answers (by default an HTTP 500 that says the script is exhausted).
//
// The server speaks the wire protocol, not loopbot's types, so that the client under test
// goes through its real HTTP library: it serves POST {base}/chat/completions under any base
// path (/v1/chat/completions, /chat/completions, Azure's
// /openai/deployments/{name}/chat/completions), both as one JSON body and, when the request
// asks for it, as server-sent events with tool-call deltas split across chunks and
// interleaved between parallel calls, a usage chunk and data: [DONE].
//
// Every request is decoded and recorded (Requests), so a test can check what the client sent:
// roles, contents, tool calls and their IDs, the tools offered, the stream flag and the
// response format. Token usage in replies is estimated as characters/4 of the message
// contents and tool-call arguments, so a test can also reason about context size through
// the usage the client reports.
//
// Lean is a server for load benchmarks, where the fake shares the machine with the bot it
// measures: it keeps no request and decodes none into values, but reads each body once as a
// stream of JSON tokens, counting the messages, tool results and tools an answer depends on,
// and answers non-streamed completions with a tool call or a text after a fixed latency.
//
// The package does not import testing, so the loopbot binary can serve it in demo mode;
// NewTest is the convenience for tests.
package llmtest
