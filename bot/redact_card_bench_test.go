package bot

import (
	"fmt"
	"testing"
)

// BenchmarkRedactCardAgain redacts a status card of five steps as the dispatcher does each
// time the card's run moves on: the same title, buttons and earlier steps, one step more.
// An op is one send of the card.
func BenchmarkRedactCardAgain(b *testing.B) {
	r := NewRedactor([]string{"configured-secret-value-42"})
	card := Message{Kind: KindStatus, Title: "Working", Text: "Step 5 · 1.2s · 2480 tokens",
		Buttons: []Button{{ID: "a1", Label: "Cancel"}, {ID: "a2", Label: "Pause"}}}
	for i := range 5 {
		card.Steps = append(card.Steps, Step{ID: fmt.Sprintf("call_%d", i), Tool: "look",
			Args: fmt.Sprintf("n: %d", i), Result: "a short result of the kind a directory listing gives"})
	}
	b.ReportAllocs()
	for b.Loop() {
		r.message(card)
	}
}
