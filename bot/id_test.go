package bot_test

import (
	"regexp"
	"slices"
	"testing"

	"github.com/loopbot/loopbot/bot"
)

// TestNewIDsSortAsMadeAndDoNotRepeat checks what the store's keys rely on: IDs made one after
// another sort in that order (a burst's runs then share the pages of each bucket), never
// repeat, and stay 32 characters of lowercase base32hex, short enough for a Slack action
// value and a Discord custom_id.
func TestNewIDsSortAsMadeAndDoNotRepeat(t *testing.T) {
	shape := regexp.MustCompile(`^[0-9a-v]{32}$`)
	ids := make([]string, 5000)
	for i := range ids {
		ids[i] = bot.NewID()
		if !shape.MatchString(ids[i]) {
			t.Fatalf("NewID() = %q, want 32 characters of lowercase base32hex", ids[i])
		}
	}
	if !slices.IsSorted(ids) {
		t.Error("IDs made one after another do not sort in the order they were made")
	}
	if len(slices.Compact(slices.Clone(ids))) != len(ids) {
		t.Error("NewID repeated an ID")
	}
}
