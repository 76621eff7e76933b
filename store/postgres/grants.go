package postgres

import (
	"errors"
	"fmt"
	"slices"

	"github.com/loopbot/loopbot/bot"
)

// Channel grants ("Always allow here", bot/grants.go) are the grants bucket of the records
// table, keyed by their ID. A channel has a handful at most, so Grants reads the bucket and
// keeps the channel's, as the bbolt store does.
const bucketGrants = "grants"

func (t *tx) PutGrant(g *bot.ChannelGrant) error {
	if g == nil || g.Channel == "" {
		return errors.New("put grant: no channel")
	}
	return putRecord(t, bucketGrants, g.ID(), "grant", g)
}

func (t *tx) Grant(id string) (*bot.ChannelGrant, error) {
	return getRecord[bot.ChannelGrant](t, bucketGrants, id, "grant")
}

// Grants lists the grants of one channel, oldest first.
func (t *tx) Grants(channel string) ([]*bot.ChannelGrant, error) {
	if err := t.check(false); err != nil {
		return nil, fmt.Errorf("list grants: %w", err)
	}
	all, err := scan[bot.ChannelGrant](t, bucketGrants, "grant",
		"SELECT key, data FROM records WHERE bucket = $1 ORDER BY key"+t.forUpdate(), bucketGrants)
	if err != nil {
		return nil, err
	}
	out := slices.DeleteFunc(all, func(g *bot.ChannelGrant) bool { return g.Channel != channel })
	slices.SortStableFunc(out, func(a, b *bot.ChannelGrant) int { return a.Grant.At.Compare(b.Grant.At) })
	return out, nil
}

func (t *tx) DeleteGrant(id string) error {
	if err := t.check(true); err != nil {
		return fmt.Errorf("delete grant %s: %w", id, err)
	}
	if err := t.write("DELETE FROM records WHERE bucket = $1 AND key = $2", bucketGrants, id); err != nil {
		return fmt.Errorf("delete grant %s: %w", id, err)
	}
	return nil
}
