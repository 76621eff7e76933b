package tools

// MCPServerEnv lets the external tests start this test binary as a stdio MCP server: with
// it set to "1", TestMain serves the test MCP server on stdin and stdout instead of running
// tests.
const MCPServerEnv = serverEnv
