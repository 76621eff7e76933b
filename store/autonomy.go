package store

import (
	"errors"

	"github.com/loopbot/loopbot/bot"
)

// The channel_autonomy bucket holds the autonomy level approvers set per channel, keyed by
// bot.ChannelKey. It needs no new schema version: an older loopbot ignores the bucket, and
// Open creates it in an older file.

func (t *tx) ChannelAutonomy(thread bot.ThreadRef) (*bot.ChannelAutonomy, error) {
	return get[bot.ChannelAutonomy](t, bucketAutonomy, bot.ChannelKey(thread), "channel autonomy")
}

func (t *tx) PutChannelAutonomy(c *bot.ChannelAutonomy) error {
	if c == nil || c.Platform == "" || c.Channel == "" {
		return errors.New("put channel autonomy: no platform or channel")
	}
	t.boundaryWritten()
	return put(t, bucketAutonomy, c.Key(), "channel autonomy", c)
}
