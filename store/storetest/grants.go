package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

func newGrant(id, channel, pattern string, at time.Time) *bot.ChannelGrant {
	return &bot.ChannelGrant{Channel: channel, RunID: "run-1", RevokeAction: "revoke-" + id,
		Grant: agent.Grant{ID: id, Scope: agent.GrantChannel, Tool: "shell", Pattern: pattern, MaxRisk: agent.RiskConfirm, By: "ann", At: at}}
}

// testGrants checks channel grants: listed per channel oldest first, read back as stored,
// deleted by a revoke, refused without an ID or channel, kept across a restart, and not
// writable in a View.
func testGrants(t *testing.T, su *suite) {
	s := su.open(t)
	chA, chB := threadA.ChannelKey(), threadB.ChannelKey()
	update(t, s, func(tx bot.Tx) error {
		for _, g := range []*bot.ChannelGrant{
			newGrant("g2", chA, "go test", at(2*time.Minute)),
			newGrant("g1", chA, "make lint", at(time.Minute)),
			newGrant("g3", chB, "go vet", at(3*time.Minute)),
		} {
			if err := tx.PutGrant(g); err != nil {
				return err
			}
		}
		return nil
	})
	list := func(s bot.Store, ch string) []string {
		var ids []string
		view(t, s, func(tx bot.Tx) error {
			gs, err := tx.Grants(ch)
			for _, g := range gs {
				ids = append(ids, g.ID())
			}
			return err
		})
		return ids
	}
	if got := list(s, chA); len(got) != 2 || got[0] != "g1" || got[1] != "g2" {
		t.Fatalf("grants of A = %v, want [g1 g2]", got)
	}
	view(t, s, func(tx bot.Tx) error {
		g, err := tx.Grant("g3")
		if err != nil {
			return err
		}
		if g.Channel != chB || g.Grant.Pattern != "go vet" || g.Grant.MaxRisk != agent.RiskConfirm || !g.Grant.At.Equal(at(3*time.Minute)) {
			t.Errorf("grant g3 read back as %+v", g)
		}
		return nil
	})
	for _, bad := range []*bot.ChannelGrant{newGrant("", chA, "x", t0), newGrant("g9", "", "x", t0), nil} {
		if err := s.Update(t.Context(), func(tx bot.Tx) error { return tx.PutGrant(bad) }); err == nil {
			t.Errorf("put grant %+v: no error", bad)
		}
	}
	if err := s.View(t.Context(), func(tx bot.Tx) error { return tx.PutGrant(newGrant("g8", chA, "x", t0)) }); err == nil {
		t.Error("PutGrant in a View: no error")
	}
	update(t, s, func(tx bot.Tx) error { return tx.DeleteGrant("g1") })
	view(t, s, func(tx bot.Tx) error {
		if _, err := tx.Grant("g1"); !errors.Is(err, bot.ErrNotFound) {
			t.Errorf("revoked grant: err %v, want ErrNotFound", err)
		}
		return nil
	})
	if su.reopen != nil {
		s = su.reopen(t, s)
	}
	if got := list(s, chA); len(got) != 1 || got[0] != "g2" {
		t.Fatalf("grants of A after a revoke and a restart = %v, want [g2]", got)
	}
	if got := list(s, "slack/T1/nowhere"); len(got) != 0 {
		t.Fatalf("grants of a channel with none = %v", got)
	}
}
