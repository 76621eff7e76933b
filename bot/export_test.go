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

// Releasable exposes how much of a text still being written may be streamed.
func Releasable(r *Redactor, s string) int { return r.releasable(s) }

// StreamEvery is the least time between two appends to one stream.
const StreamEvery = streamEvery

// RunsInFlight is how many runs the process's GC pacer counts in flight, and of them how
// many of bots that want its pacing.
func RunsInFlight() (all, paced int) {
	pacer.mu.Lock()
	defer pacer.mu.Unlock()
	return pacer.runs, pacer.paced
}

// SendWorkersStarted is how many workers the bot's dispatcher has started.
func SendWorkersStarted(b *Bot) int { return int(b.disp.started.Load()) }
