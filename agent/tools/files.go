package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/loopbot/loopbot/agent"
)

var (
	_ agent.Tool = (*ReadFile)(nil)
	_ agent.Tool = (*WriteFile)(nil)
	_ agent.Tool = (*ListFiles)(nil)
)

const (
	defaultMaxRead    = 256 << 10
	defaultMaxWrite   = 1 << 20
	defaultMaxEntries = 1000
	filesTimeout      = 30 * time.Second
)

// errEscape is the error of every path that would leave the workspace.
var errEscape = errors.New("path escapes the workspace")

// workspacePath checks a path the model gave and returns it cleaned, relative to the
// workspace. Absolute paths and paths that climb out with ".." are refused here; symlinks
// that point out are refused by os.Root when the path is opened.
func workspacePath(p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", errors.New("path contains a NUL byte")
	}
	if p == "" {
		return ".", nil
	}
	if strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`) {
		return "", fmt.Errorf("%q is absolute: %w (use a path relative to the workspace)", p, errEscape)
	}
	clean := path.Clean(p)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%q: %w", p, errEscape)
	}
	return clean, nil
}

// openRoot opens the run's workspace as an os.Root, which refuses any path, symlinks
// included, that resolves outside it.
func openRoot(ws *Workspaces, runID string) (*os.Root, error) {
	dir, err := ws.Dir(runID)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	return root, nil
}

// rootErr rewords os.Root's refusals so the model understands them.
func rootErr(p string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "escapes from parent") {
		return fmt.Errorf("%q: %w", p, errEscape)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%q does not exist in the workspace", p)
	}
	return err
}

// errNotRegular is the error of every path that names something other than a regular file or
// directory: a named pipe, a socket or a device could block the tool forever or reach
// outside the workspace.
var errNotRegular = errors.New("the file tools only read and write regular files")

// openRegular opens a path of the workspace for the file tools and returns it only if it is
// a regular file. The open never blocks and never follows a symlink by itself: O_NONBLOCK
// makes opening a named pipe return at once instead of waiting for a writer, and os.Root
// opens every component with O_NOFOLLOW, resolving symlinks that stay inside the workspace
// itself.
func openRegular(root *os.Root, p, shown string, flag int, perm fs.FileMode) (*os.File, fs.FileInfo, error) {
	f, err := root.OpenFile(p, flag|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, perm)
	if errors.Is(err, syscall.ENXIO) {
		// Opening a socket fails so, as does a non-blocking write-only open of a named pipe
		// that nobody reads.
		kind := "not a regular file"
		if fi, lerr := root.Lstat(p); lerr == nil {
			kind = fileKind(fi.Mode())
		}
		return nil, nil, fmt.Errorf("%q is %s: %w", shown, kind, errNotRegular)
	}
	if err != nil {
		return nil, nil, rootErr(shown, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("stat %q: %w", shown, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		if fi.IsDir() {
			return nil, nil, fmt.Errorf("%q is a directory (use list_files for directories)", shown)
		}
		return nil, nil, fmt.Errorf("%q is %s: %w", shown, fileKind(fi.Mode()), errNotRegular)
	}
	return f, fi, nil
}

// fileKind names the type of a file that is not regular.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a regular file"
}

// ctxReader stops a read between chunks once its context is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p[:min(len(p), 64<<10)])
}

// ReadFile is the read_file tool: it returns a text file of the run's workspace.
type ReadFile struct {
	ws  *Workspaces
	cfg FilesConfig
}

// NewReadFile returns read_file over the given workspaces.
func NewReadFile(ws *Workspaces, cfg FilesConfig) *ReadFile { return &ReadFile{ws: ws, cfg: cfg} }

// Info describes read_file.
func (t *ReadFile) Info() agent.ToolInfo {
	return agent.ToolInfo{
		Spec: agent.ToolSpec{
			Name:        "read_file",
			Description: "Read a text file from the workspace. Paths are relative to the workspace. Long files are returned in parts: pass offset to read further.",
			Parameters: json.RawMessage(`{"type":"object","properties":{` +
				`"path":{"type":"string","description":"file path relative to the workspace"},` +
				`"offset":{"type":"integer","minimum":0,"description":"byte offset to start at"}},` +
				`"required":["path"],"additionalProperties":false}`),
		},
		ReadOnly:   true,
		Idempotent: true,
		Timeout:    filesTimeout,
		Untrusted:  true,
	}
}

// Assess rates every read as safe, unless config raises it.
func (t *ReadFile) Assess(args json.RawMessage) agent.Assessment {
	return raise(t.assess(args), t.cfg.Risk)
}

func (t *ReadFile) assess(json.RawMessage) agent.Assessment {
	return agent.Assessment{Risk: agent.RiskSafe, Reason: "reads a file of the workspace"}
}

// Call reads the file.
func (t *ReadFile) Call(ctx context.Context, inv agent.Invocation) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("read_file: %w", err)
	}
	var args struct {
		Path   string `json:"path"`
		Offset int64  `json:"offset"`
	}
	if err := json.Unmarshal(inv.Args, &args); err != nil {
		return "", fmt.Errorf("read_file arguments: %w", err)
	}
	p, err := workspacePath(args.Path)
	if err != nil {
		return "", err
	}
	root, err := openRoot(t.ws, inv.RunID)
	if err != nil {
		return "", err
	}
	defer root.Close()
	f, fi, err := openRegular(root, p, args.Path, os.O_RDONLY, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if args.Offset < 0 || args.Offset > fi.Size() {
		return "", fmt.Errorf("offset %d is outside the file's %d bytes", args.Offset, fi.Size())
	}
	limit := t.cfg.MaxReadBytes
	if limit <= 0 {
		limit = defaultMaxRead
	}
	data, err := io.ReadAll(io.LimitReader(ctxReader{ctx, io.NewSectionReader(f, args.Offset, fi.Size()-args.Offset)}, limit))
	if err != nil {
		return "", fmt.Errorf("read %q: %w", args.Path, err)
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return "", fmt.Errorf("%q is a binary file of %d bytes; read_file returns text only", args.Path, fi.Size())
	}
	// A cut may split a multi-byte character; drop the partial one rather than show garbage.
	for len(data) > 0 && !utf8.Valid(data) && args.Offset+int64(len(data)) < fi.Size() {
		data = data[:len(data)-1]
	}
	out := strings.ToValidUTF8(string(data), "\uFFFD")
	if end := args.Offset + int64(len(data)); end < fi.Size() {
		out += fmt.Sprintf("\n[truncated: bytes %d to %d of %d shown; call read_file again with offset=%d for more]", args.Offset, end, fi.Size(), end)
	}
	return out, nil
}

// WriteFile is the write_file tool: it creates or replaces a file of the run's workspace.
type WriteFile struct {
	ws  *Workspaces
	cfg FilesConfig
}

// NewWriteFile returns write_file over the given workspaces.
func NewWriteFile(ws *Workspaces, cfg FilesConfig) *WriteFile { return &WriteFile{ws: ws, cfg: cfg} }

// Info describes write_file. Writing the same content twice leaves the same file, so a call
// whose outcome a crash left unknown may be re-run.
func (t *WriteFile) Info() agent.ToolInfo {
	return agent.ToolInfo{
		Spec: agent.ToolSpec{
			Name:        "write_file",
			Description: "Create or replace a file in the workspace with the given text. Missing parent directories are created. Paths are relative to the workspace.",
			Parameters: json.RawMessage(`{"type":"object","properties":{` +
				`"path":{"type":"string","description":"file path relative to the workspace"},` +
				`"content":{"type":"string","description":"the file's full new content"}},` +
				`"required":["path","content"],"additionalProperties":false}`),
		},
		Idempotent: true,
		Timeout:    filesTimeout,
	}
}

// Assess rates every write as cautious, unless config raises it.
func (t *WriteFile) Assess(args json.RawMessage) agent.Assessment {
	return raise(t.assess(args), t.cfg.Risk)
}

func (t *WriteFile) assess(raw json.RawMessage) agent.Assessment {
	var args struct {
		Path string `json:"path"`
	}
	if json.Unmarshal(raw, &args) == nil {
		for _, part := range strings.Split(strings.ReplaceAll(args.Path, "\\", "/"), "/") {
			// A repository's config and hooks make git run programs (core.fsmonitor runs on
			// every git status, diff.external on git diff), and git commands are rated as
			// reads: a write there is what would turn a read into a command.
			if strings.EqualFold(part, ".git") {
				return agent.Assessment{Risk: agent.RiskConfirm, Reason: "writes inside .git, where a config or hook can make later git commands run programs"}
			}
		}
	}
	return agent.Assessment{Risk: agent.RiskCautious, Reason: "writes a file of the workspace"}
}

// Call writes the file.
func (t *WriteFile) Call(ctx context.Context, inv agent.Invocation) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("write_file: %w", err)
	}
	args, p, err := decodeWrite(inv.Args)
	if err != nil {
		return "", err
	}
	limit := t.cfg.MaxWriteBytes
	if limit <= 0 {
		limit = defaultMaxWrite
	}
	if len(args.Content) > limit {
		return "", fmt.Errorf("content is %d bytes, more than the %d allowed", len(args.Content), limit)
	}
	root, err := openRoot(t.ws, inv.RunID)
	if err != nil {
		return "", err
	}
	defer root.Close()
	if dir := path.Dir(p); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return "", rootErr(args.Path, err)
		}
	}
	if err := t.ws.fits(ctx, root, inv.RunID, p, int64(len(args.Content))); err != nil {
		return "", err
	}
	f, _, err := openRegular(root, p, args.Path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return "", err
	}
	err = writeAll(ctx, f, args.Content)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("write %q: %w", args.Path, err)
	}
	return fmt.Sprintf("wrote %d bytes to %s", len(args.Content), p), nil
}

// writeArgs are write_file's arguments.
type writeArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// decodeWrite decodes write_file's arguments and checks the path: p is it cleaned, inside
// the workspace.
func decodeWrite(raw json.RawMessage) (args writeArgs, p string, err error) {
	if err := json.Unmarshal(raw, &args); err != nil {
		return args, "", fmt.Errorf("write_file arguments: %w", err)
	}
	if p, err = workspacePath(args.Path); err != nil {
		return args, "", err
	}
	if p == "." {
		return args, "", errors.New("path names the workspace itself; give a file name")
	}
	return args, p, nil
}

// writeAll replaces the open file's content, stopping between chunks once ctx is done.
func writeAll(ctx context.Context, f *os.File, content string) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := io.Copy(f, ctxReader{ctx, strings.NewReader(content)})
	return err
}

// ListFiles is the list_files tool: it lists a directory of the run's workspace.
type ListFiles struct {
	ws  *Workspaces
	cfg FilesConfig
}

// NewListFiles returns list_files over the given workspaces.
func NewListFiles(ws *Workspaces, cfg FilesConfig) *ListFiles { return &ListFiles{ws: ws, cfg: cfg} }

// Info describes list_files.
func (t *ListFiles) Info() agent.ToolInfo {
	return agent.ToolInfo{
		Spec: agent.ToolSpec{
			Name:        "list_files",
			Description: "List the files of a workspace directory: directories end in /, files show their size, symlinks their target. Set recursive to list subdirectories too.",
			Parameters: json.RawMessage(`{"type":"object","properties":{` +
				`"path":{"type":"string","description":"directory relative to the workspace; empty for the workspace itself"},` +
				`"recursive":{"type":"boolean"}},"additionalProperties":false}`),
		},
		ReadOnly:   true,
		Idempotent: true,
		Timeout:    filesTimeout,
		Untrusted:  true,
	}
}

// Assess rates every listing as safe, unless config raises it.
func (t *ListFiles) Assess(args json.RawMessage) agent.Assessment {
	return raise(t.assess(args), t.cfg.Risk)
}

func (t *ListFiles) assess(json.RawMessage) agent.Assessment {
	return agent.Assessment{Risk: agent.RiskSafe, Reason: "lists files of the workspace"}
}

// Call lists the directory. Symlinks are shown, never followed, so a link to a directory
// outside the workspace reveals nothing but its target's name.
func (t *ListFiles) Call(ctx context.Context, inv agent.Invocation) (string, error) {
	var args struct {
		Path      string `json:"path"`
		Recursive bool   `json:"recursive"`
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("list_files: %w", err)
	}
	if err := json.Unmarshal(inv.Args, &args); err != nil {
		return "", fmt.Errorf("list_files arguments: %w", err)
	}
	p, err := workspacePath(args.Path)
	if err != nil {
		return "", err
	}
	root, err := openRoot(t.ws, inv.RunID)
	if err != nil {
		return "", err
	}
	defer root.Close()
	fi, err := root.Stat(p)
	if err != nil {
		return "", rootErr(args.Path, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%q is not a directory", args.Path)
	}
	limit := t.cfg.MaxEntries
	if limit <= 0 {
		limit = defaultMaxEntries
	}
	var b strings.Builder
	n := 0
	errFull := errors.New("full")
	err = fs.WalkDir(root.FS(), p, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if name == p {
			return nil
		}
		if n == limit {
			return errFull
		}
		n++
		rel := name
		if p != "." {
			rel = strings.TrimPrefix(name, p+"/")
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := root.Readlink(name)
			if err != nil {
				target = "?"
			}
			fmt.Fprintf(&b, "%s -> %s\n", rel, target)
		case d.IsDir():
			fmt.Fprintf(&b, "%s/\n", rel)
			if !args.Recursive {
				return fs.SkipDir
			}
		default:
			size := int64(-1)
			if info, err := d.Info(); err == nil {
				size = info.Size()
			}
			fmt.Fprintf(&b, "%s  %d bytes\n", rel, size)
		}
		return nil
	})
	switch {
	case errors.Is(err, errFull):
		fmt.Fprintf(&b, "[listing stopped at %d entries]\n", limit)
	case err != nil:
		return "", rootErr(args.Path, err)
	}
	if n == 0 {
		return "(empty directory)", nil
	}
	return b.String(), nil
}
