// Package llm implements agent.Model over any OpenAI-compatible chat completions endpoint
// (OpenAI, Azure OpenAI, Ollama, vLLM, OpenRouter), using github.com/sashabaranov/go-openai
// as the HTTP client. No go-openai type appears in its API: requests and replies are
// loopbot's own agent types, and errors are this package's or the standard library's.
//
// A Client translates an agent.Request into one chat completion: the conversation with the
// assistant's tool calls and the tool results that answer them, the tools as function tools
// with their JSON Schemas, a JSON-object response format when asked. The reply comes back as
// an assistant agent.Message whose tool calls keep their arguments exactly as the model wrote
// them (the loop, not this package, judges whether they are valid JSON), with the usage and
// its cost under the configured Price.
//
// Failures that are worth another attempt (429, 5xx, a dropped connection, an attempt that
// timed out, a stream cut short) are retried with exponential backoff and jitter, up to
// Config.MaxRetries times and never past the caller's context. A Retry-After header (in
// seconds or as an HTTP date) or OpenAI's retry-after-ms replaces the backoff. go-openai's
// errors do not carry response headers, so a small http.RoundTripper notes them for the
// attempt that received them. When the endpoint still refuses with 429, Complete returns an
// *agent.RateLimitError with the wait the endpoint last asked for, so the caller can schedule
// the run instead of spinning. Other 4xx answers are not retried. No error text contains the
// API key, even when the endpoint echoes it. The error of the last attempt is an *ModelError
// (errkind.go) whose Kind says what failed (connection refused, DNS, timeout, TLS, a closed
// connection, 401/403, 404, 429, 5xx, another 4xx, a reply that is not a chat completion) and
// whose SafeSummary says so with what to check, without URL, host or key: it is what the agent
// shows the thread.
//
// Replies are decoded with this package's own wire types, not go-openai's, so that what
// providers really send is understood. Tool-call arguments sent as a JSON object instead of
// a string (some proxies) become that object's JSON text. An error reported inside an answer
// that began as a success (OpenRouter's error chunk with finish_reason "error" in the middle
// of a stream, an error event, an error object in a 200 body) is a *ProviderError carrying
// the provider's code and message, not an empty reply; it is not retried.
//
// With Config.Stream the reply is streamed (with usage in the final chunk) and accumulated:
// text deltas are joined and tool-call deltas are gathered by their index, which lets
// parallel calls interleave; the call's ID and name come in its first delta and its
// arguments in pieces. A new ID at an index already taken is a new call (Ollama sends
// parallel calls whole, each at index 0). A stream that ends without a finish reason is an
// error, and retried, rather than a silently shortened reply. Keep-alive comments
// (OpenRouter sends them while the model works) are skipped, up to a bound far above what a
// long wait brings.
//
// Recorded replies of real providers, each citing its source, are the test fixtures in
// testdata; every one is run through the client and through one step of an agent.
package llm
