package postgres

import (
	"errors"

	"github.com/loopbot/loopbot/bot"
)

// Channel autonomy levels are a bucket of the records table, keyed by bot.ChannelKey: a
// record read by key alone needs no migration.
const bucketAutonomy = "channel_autonomy"

func (t *tx) ChannelAutonomy(thread bot.ThreadRef) (*bot.ChannelAutonomy, error) {
	return getRecord[bot.ChannelAutonomy](t, bucketAutonomy, bot.ChannelKey(thread), "channel autonomy")
}

func (t *tx) PutChannelAutonomy(c *bot.ChannelAutonomy) error {
	if c == nil || c.Platform == "" || c.Channel == "" {
		return errors.New("put channel autonomy: no platform or channel")
	}
	return putRecord(t, bucketAutonomy, c.Key(), "channel autonomy", c)
}
