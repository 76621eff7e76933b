package store

import (
	"bytes"
	"encoding/json"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// Putting a run's head.
//
// The dispatcher saves the reference of every status card it posts, and a pause or a
// question changes a run's buttons or its asker: PutRunHead rewrites the run's record with
// the new head and the state it held. Decoding that state to encode it again was most of
// what a card's first post cost the one writer. A record PutRun or PutRunHead wrote is its
// head's bytes with the state's in place of the head's null (recordData), and the head is
// stored beside it, written in the same transaction: the state's bytes are what lies
// between the two ends the head and the record share, and are copied as they are.

// storedState returns the bytes of the state in record, a runs value, given head, the
// run_heads value stored with it; ok is false for a record that is not its head with the
// state spliced in (one written before records were spliced), which the caller decodes.
func storedState(record, head []byte) (state json.RawMessage, ok bool) {
	i := bytes.Index(head, stateNull)
	if i < 0 {
		return nil, false
	}
	prefix, suffix := head[:i+len(`"state":`)], head[i+len(stateNull):]
	if len(record) <= len(prefix)+len(suffix) || !bytes.HasPrefix(record, prefix) || !bytes.HasSuffix(record, suffix) {
		return nil, false
	}
	return record[len(prefix) : len(record)-len(suffix)], true
}

// headStatus is the status a run's head holds.
func headStatus(head []byte, id string) (agent.Status, error) {
	h, err := decode[struct {
		Status agent.Status `json:"status"`
	}](head, "run head "+id)
	if err != nil {
		return "", err
	}
	return h.Status, nil
}

// runWithHead returns the runs and run_heads values of run r, whose record is stored as
// record with storedHead beside it: r's fields but for the stored state and status.
func runWithHead(record, storedHead []byte, r *bot.RunRecord) (data, headData []byte, err error) {
	rec := *r
	rec.State = nil
	state, spliced := storedState(record, storedHead)
	if spliced {
		rec.Status, err = headStatus(storedHead, r.ID)
	} else {
		var stored *bot.RunRecord
		stored, err = decode[bot.RunRecord](record, "run "+r.ID)
		if err == nil {
			rec.Status = stored.Status
			state, err = json.Marshal(stored.State)
		}
	}
	if err != nil {
		return nil, nil, err
	}
	h := head(&rec)
	if headData, err = json.Marshal(&h); err != nil {
		return nil, nil, err
	}
	data, err = recordData(&rec, headData, state)
	return data, headData, err
}
