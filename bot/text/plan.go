package text

// Mark is the neutral checklist mark of a plan step's status. Each renderer draws it in its
// own way (an emoji shortcode in Slack, a Unicode emoji in Discord, a glyph and a CSS class
// in the web console); the table here decides which mark a status gets, once for all.
type Mark string

// The marks, named after what a reader sees: a step still to do, one being worked on, one
// done, one failed.
const (
	MarkPending Mark = "pending"
	MarkActive  Mark = "in_progress"
	MarkDone    Mark = "done"
	MarkFailed  Mark = "failed"
)

// PlanMark returns the mark of a plan status as the agent writes it (pending, in_progress,
// done, failed). A status it does not know is shown as pending: a step of unknown state
// is one not known to be done.
func PlanMark(status string) Mark {
	switch m := Mark(status); m {
	case MarkActive, MarkDone, MarkFailed:
		return m
	}
	return MarkPending
}
