package agent

import (
	"context"
	"fmt"
)

// A person may steer a run while it works: what they say in its thread reaches the model at
// the next step boundary, as their message. The bot keeps such notes durably beside the run
// and hands them over through Hooks.Steer; the state remembers the last note it took
// (SteerSeq), so a note is seen once even when a crash makes the loop ask again.

// Note is one thing a person said to a working run.
type Note struct {
	// Seq orders a thread's notes; the loop asks for those after the last it took.
	Seq  int
	From string
	Text string
	// Sanity asks for a sanity check at the step boundary instead of saying anything to
	// the model.
	Sanity bool
}

// steer takes the notes that arrived since the last step and adds them to the conversation.
func (r *runner) steer(ctx context.Context) {
	for _, n := range r.newNotes(ctx) {
		r.st.Messages = append(r.st.Messages, noteMessage(n))
	}
}

// newNotes reads the notes after the last one the run took and marks them taken.
func (r *runner) newNotes(ctx context.Context) []Note {
	if r.h.Steer == nil {
		return nil
	}
	st := r.st
	notes, err := r.h.Steer(ctx, st.SteerSeq)
	if err != nil {
		// A note that cannot be read now is read at the next boundary.
		r.a.log.Warn("read notes for a working run", "run", st.RunID, "err", err)
		return nil
	}
	var out []Note
	for _, n := range notes {
		if n.Seq <= st.SteerSeq {
			continue
		}
		if n.Sanity {
			r.sanityAsked = n.From + " asked for it in the thread"
			st.SteerSeq = n.Seq
			continue
		}
		out = append(out, n)
		st.SteerSeq = n.Seq
	}
	return out
}

func noteMessage(n Note) Message {
	return Message{Role: RoleUser, Content: fmt.Sprintf("While you work, %s says: %s", n.From, n.Text)}
}
