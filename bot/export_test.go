package bot

// RetryDelay exposes retryDelay to the external tests.
var RetryDelay = retryDelay

// ControlWords exposes controlWords and its answers to the external tests.
var ControlWords = controlWords

const (
	WordsNote  = wordsNote
	WordsStop  = wordsStop
	WordsPause = wordsPause
)

// ParseArgs exposes parseArgs to the fuzz target.
var ParseArgs = parseArgs

// DraftPlaybook exposes draftPlaybook to the fuzz target.
var DraftPlaybook = draftPlaybook
