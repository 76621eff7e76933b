package bot

// ReadableArgs exposes readableArgs to the external tests.
var ReadableArgs = readableArgs

// RunSteps and WrittenFiles expose runSteps and writtenFiles to the external tests.
var (
	RunSteps     = runSteps
	WrittenFiles = writtenFiles
)

// MaxSteps is how many steps a card carries.
const MaxSteps = maxSteps
