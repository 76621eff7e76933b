package bot

// ReadableArgs exposes readableArgs to the external tests.
var ReadableArgs = readableArgs
