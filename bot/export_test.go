package bot

// RetryDelay exposes retryDelay to the external tests.
var RetryDelay = retryDelay
