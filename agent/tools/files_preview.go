package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"unicode/utf8"

	"github.com/loopbot/loopbot/agent"
)

var _ agent.Previewer = (*WriteFile)(nil)

// Bounds of write_file's preview.
const (
	// maxDiffInput is the largest existing file compared with the new content.
	maxDiffInput = 256 << 10
	// maxDiffShown bounds the diff on the card, within what a Slack block or a Discord
	// embed can show beside the arguments.
	maxDiffShown = 2400
)

// Preview shows what the write would change when it replaces a file: the unified diff of
// the file as it is now and the new content. A new file has no preview (the card shows its
// content); a file too large, binary or too different to compare gets a line that says so.
func (t *WriteFile) Preview(ctx context.Context, inv agent.Invocation) (string, error) {
	args, p, err := decodeWrite(inv.Args)
	if err != nil {
		// The call will fail as it runs, and say why.
		return "", nil
	}
	root, err := openRoot(t.ws, inv.RunID)
	if err != nil {
		return "", err
	}
	defer root.Close()
	f, fi, err := openRegular(root, p, args.Path, os.O_RDONLY, 0)
	if err != nil {
		if _, lerr := root.Lstat(p); errors.Is(lerr, fs.ErrNotExist) {
			return "", nil
		}
		return "", err
	}
	defer f.Close()
	if fi.Size() > maxDiffInput {
		return fmt.Sprintf("Replaces %s, a file of %d bytes: too large to compare here.", p, fi.Size()), nil
	}
	old, err := io.ReadAll(io.LimitReader(ctxReader{ctx, f}, maxDiffInput))
	if err != nil {
		return "", fmt.Errorf("read %q: %w", args.Path, err)
	}
	if bytes.IndexByte(old, 0) >= 0 || !utf8.Valid(old) {
		return fmt.Sprintf("Replaces %s, a binary file of %d bytes.", p, len(old)), nil
	}
	if string(old) == args.Content {
		return fmt.Sprintf("Leaves %s as it is: the content is the same.", p), nil
	}
	diff, ok := unifiedDiff(p, string(old), args.Content, maxDiffShown)
	if !ok {
		return fmt.Sprintf("Replaces %s (%d lines) with %d lines: too different to compare here.",
			p, len(diffLines(string(old))), len(diffLines(args.Content))), nil
	}
	return diff, nil
}
