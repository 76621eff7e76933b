package store

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/loopbot/loopbot/bot"
)

// The outbox item's encoding.
//
// Every checkpoint puts its run's status card in the outbox again, inside the one writer's
// transaction, and every sent card is checked against the stored bytes of its item
// (OutboxHolds), also in the writer: so an outbox item is written by appendOutboxItem
// rather than encoding/json's reflection (BenchmarkOutboxItemEncoding). The bytes are
// encoding/json's, field for field (FuzzAppendOutboxItem holds them to it, and
// TestAppendOutboxItemCoversEveryField fails when OutboxItem gains a field this does not
// write). An item with a time encoding/json refuses is marshalled by encoding/json, which
// gives its error.

// appendOutboxItem appends it's JSON, as encoding/json writes it, to b.
func appendOutboxItem(b []byte, it *bot.OutboxItem) ([]byte, error) {
	if !rfc3339(it.CreatedAt) {
		data, err := json.Marshal(it)
		return append(b, data...), err
	}
	b = append(b, `{"key":`...)
	b = appendJSONString(b, it.Key)
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, string(it.Kind))
	if it.RunID != "" {
		b = append(b, `,"run_id":`...)
		b = appendJSONString(b, it.RunID)
	}
	if it.ApprovalID != "" {
		b = append(b, `,"approval_id":`...)
		b = appendJSONString(b, it.ApprovalID)
	}
	b = append(b, `,"thread":`...)
	b = appendThreadRef(b, it.Thread)
	if it.Text != "" {
		b = append(b, `,"text":`...)
		b = appendJSONString(b, it.Text)
	}
	if len(it.Actions) > 0 {
		b = append(b, `,"actions":[`...)
		for i, a := range it.Actions {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, a)
		}
		b = append(b, ']')
	}
	b = append(b, `,"created_at":"`...)
	b = it.CreatedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if it.Attempts != 0 {
		b = append(b, `,"attempts":`...)
		b = strconv.AppendInt(b, int64(it.Attempts), 10)
	}
	if s := it.Sending; s != nil {
		b = append(b, `,"sending":{"owner":`...)
		b = appendJSONString(b, s.Owner)
		b = append(b, `,"term":`...)
		b = strconv.AppendInt(b, s.Term, 10)
		b = append(b, '}')
	}
	return append(b, '}'), nil
}

// encodeOutboxItem is it as PutOutbox stores it.
func encodeOutboxItem(it *bot.OutboxItem) ([]byte, error) {
	return appendOutboxItem(make([]byte, 0, 192+len(it.Key)+len(it.RunID)+len(it.Text)+len(it.Thread.Thread)), it)
}
