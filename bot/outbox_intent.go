package bot

// Sending marks an outbox item whose new post is about to be made, written to the store
// before the call. A post that reached the platform but whose "sent" the sender could not
// record (it was killed, paused past its leadership, or the store refused the write) is
// found again in the outbox. Edits are idempotent, so editing again is harmless; a new post
// is not, and no platform call tells whether it went out. The mark tells the next sender
// that the outcome is unknown: it posts again (a message shown twice is better than an
// answer or an approval nobody sees) and says on the message that it may repeat one.
type Sending struct {
	Owner string `json:"owner"` // the replica that made the call
	Term  int64  `json:"term"`  // its leadership's term of the outbox
}

// repeatNote is said on a new post whose earlier attempt may have reached the platform.
const repeatNote = "Sent again: the replica that sent it first stopped before it could record it, so this may repeat a message above."

// sending is this leader's mark.
func (d *dispatcher) sending() *Sending {
	return &Sending{Owner: d.lead.owner, Term: d.lead.term()}
}

// markable reports whether the item is a new post whose intent is recorded before the
// call: posts that are always new, under keys only the records write, once. A card's
// first post is not marked: its key is rewritten with every state, and a second card is
// the worst a repeat does.
func markable(it OutboxItem) bool { return !edited(it.Kind) }

// mark prepares job j for its call: an item marked by another sender gets the repeat note,
// and the item is marked as this leader's. It reports whether the mark must be written
// before the call.
func (d *dispatcher) mark(j *job) bool {
	if !markable(j.it) {
		return false
	}
	mine := d.sending()
	prior := j.it.Sending
	if prior != nil && *prior == *mine {
		return false // this leader's own retry
	}
	j.repeat = prior != nil
	j.it.Sending = mine
	return true
}

// withRepeatNote adds the repeat note to msg's footer.
func withRepeatNote(msg Message) Message {
	if msg.Footer == "" {
		msg.Footer = repeatNote
	} else {
		msg.Footer += " · " + repeatNote
	}
	return msg
}
