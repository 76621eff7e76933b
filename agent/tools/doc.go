// Package tools holds loopbot's built-in tools and the tools of configured MCP servers, each an
// agent.Tool.
//
// The built-in tools are http_fetch (with SSRF protection decided at dial time on the
// resolved address, and fetched content marked as untrusted), shell (a command run under
// bubblewrap in the run's workspace, its risk assessed from the parsed command against an
// allowlist of read-only programs and their options: AssessCommand), and read_file,
// write_file and list_files (confined to the run's workspace through os.Root, opening without
// blocking or following links and refusing anything but regular files and directories, so a
// named pipe cannot hang a run). Every tool returns when its context is done. Every run gets
// its own workspace directory, <workspace>/<sanitized run ID>, created on
// demand, so runs never see each other's files.
//
// LimitsConfig bounds each shell command and workspace (limits.go): prlimit(1) sets the
// per-process limits (data, file size, and processes when nothing better is available), a
// cgroup per command (cgroup.go) bounds its processes and memory where the bot's cgroup is
// writable, bubblewrap sizes /tmp, and the workspace's disk use is measured while a command
// runs. A limit hit is a tool error wrapping ErrLimit and naming the config key.
//
// MCP servers, reached over stdio or streamable HTTP with the official SDK, are supervised by
// a Manager: one that fails to start or dies is logged and restarted with backoff, and its
// tools, named <server>__<tool>, answer with a clear error while it is down. A server may
// sample the model given with WithSamplingModel during a call of its tools (mcp_sampling.go:
// bounded per call, logged with the run, noted in the call's result); its requests for user
// input are declined, and the result tells the model so. Only those two capabilities are
// advertised. Over HTTP, idle connections are dropped before common server keep-alives end
// and a request lost on a reused connection before any answer is sent again
// (mcp_transport.go).
//
// Build turns a Config (the [tools] section of the config file, with the file's [mcp] section
// in its MCP field) into a Set: the tools the model will see, and a listing with their risk
// for `loopbot check`. Configured risk levels only ever raise a tool's own assessment.
package tools
