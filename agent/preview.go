package agent

import (
	"context"
	"strings"
	"time"
)

// Previewer is a tool that can show a person what a call would change before they approve
// it: write_file shows the difference from the file it would replace. The preview goes on
// the approval card as it is, so it should be short, and say when it was cut.
type Previewer interface {
	// Preview describes the effect of the call, or returns "" when there is nothing to add
	// to the arguments (a new file, say). It must not change anything.
	Preview(ctx context.Context, inv Invocation) (string, error)
}

// previewTimeout bounds one preview: a card that waits for a slow disk is worse than one
// without its diff.
const previewTimeout = 5 * time.Second

// maxPreviewBytes bounds a stored preview, whatever the tool returns.
const maxPreviewBytes = 4 << 10

// preview asks the tools that can for a preview of each call awaiting approval that has
// none yet. A failed preview is logged and left out: the card still shows the arguments.
func (r *runner) preview(ctx context.Context) {
	for i := range r.st.Calls {
		c := &r.st.Calls[i]
		if c.Status != CallAwaitingApproval || c.Preview != "" {
			continue
		}
		p, ok := r.a.tools[c.Name].tool.(Previewer)
		if !ok {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, previewTimeout)
		out, err := p.Preview(pctx, Invocation{RunID: r.st.RunID, CallID: c.ID, Args: rawArgs(c.Arguments)})
		cancel()
		if err != nil {
			r.a.log.Warn("tool preview failed", "run", r.st.RunID, "tool", c.Name, "call", c.ID, "err", err)
			continue
		}
		if len(out) > maxPreviewBytes {
			out = strings.ToValidUTF8(out[:maxPreviewBytes], "") + "\n(cut)"
		}
		c.Preview = out
	}
}
