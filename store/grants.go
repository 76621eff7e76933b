package store

import (
	"errors"
	"fmt"
	"slices"

	"github.com/loopbot/loopbot/bot"
)

// Channel grants ("Always allow here", bot/grants.go) live in the grants bucket under their
// ID. A channel has a handful at most, so Grants scans the bucket rather than keep an index
// per channel. The bucket needs no new schema version: Open creates it in an older file, and
// an older loopbot ignores it.

var bucketGrants = []byte("grants") // grant ID -> bot.ChannelGrant

func (t *tx) PutGrant(g *bot.ChannelGrant) error {
	if g == nil || g.Channel == "" {
		return errors.New("put grant: no channel")
	}
	return put(t, bucketGrants, g.ID(), "grant", g)
}

func (t *tx) Grant(id string) (*bot.ChannelGrant, error) {
	return get[bot.ChannelGrant](t, bucketGrants, id, "grant")
}

// Grants lists the grants of one channel, oldest first. A file opened read-only from before
// grants existed has no bucket, and so no grants.
func (t *tx) Grants(channel string) ([]*bot.ChannelGrant, error) {
	if !t.closed && t.btx.Bucket(bucketGrants) == nil && !t.btx.Writable() {
		return nil, nil
	}
	out, err := scan(t, bucketGrants, "grant", func(g *bot.ChannelGrant) bool { return g.Channel == channel })
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b *bot.ChannelGrant) int { return a.Grant.At.Compare(b.Grant.At) })
	return out, nil
}

func (t *tx) DeleteGrant(id string) error {
	b, err := t.bucket(bucketGrants)
	if err != nil {
		return fmt.Errorf("delete grant %s: %w", id, err)
	}
	t.wrote = true
	if err := b.Delete([]byte(id)); err != nil {
		return fmt.Errorf("delete grant %s: %w", id, err)
	}
	return nil
}
