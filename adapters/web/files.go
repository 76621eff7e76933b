package web

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/loopbot/loopbot/bot"
)

// The console links the files a run wrote (bot.Message.Files) to a read-only view of them:
// GET /files/{run}/{path}. It serves a file only if a message of a thread the person may
// see lists that path for that run, from that run's workspace (WithWorkspaces), and only a
// regular file reached through no symlink: a link the run made to /etc/passwd, or to
// another run's workspace, is refused as if it did not exist. Files are served as plain
// text, so an HTML file the model wrote is shown, never run.

// maxFileView bounds what the view serves of one file.
const maxFileView = 1 << 20

// WithWorkspaces lets the console show the files runs wrote: dir returns the workspace
// directory of a run by its ID. Without it, links to files answer 404.
func WithWorkspaces(dir func(runID string) string) Option {
	return func(a *Adapter) { a.workspace = dir }
}

// renderFiles renders a message's written files as links to their view, or "" if it lists
// none.
func renderFiles(m bot.Message) string {
	if len(m.Files) == 0 || m.Workspace == "" {
		return ""
	}
	var b strings.Builder
	b.WriteString(`<footer class="msg-footer msg-files">Files written: `)
	for i, f := range m.Files {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(`<a href="` + escapeText(fileURL(m.Workspace, f)) + `" target="_blank" rel="noopener nofollow">` + escapeText(f) + "</a>")
	}
	b.WriteString("</footer>\n")
	return b.String()
}

// fileURL is the view's address of file p of run's workspace, every segment escaped.
func fileURL(run, p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return "/files/" + url.PathEscape(run) + "/" + strings.Join(segs, "/")
}

// cleanFilePath reports whether p is a workspace path as the bot lists them: relative,
// clean, inside the workspace, naming something other than the workspace itself.
func cleanFilePath(p string) bool {
	return p != "" && p != "." && !strings.ContainsRune(p, 0) && path.Clean(p) == p && !path.IsAbs(p) &&
		p != ".." && !strings.HasPrefix(p, "../") && !strings.Contains(p, `\`)
}

// listed reports whether a thread who may see holds a message listing file p of run's
// workspace. a.mu must be held.
func (a *Adapter) listed(who identity, run, p string) bool {
	for _, t := range a.threads {
		if !a.mayView(who, t.id) {
			continue
		}
		for _, e := range t.entries {
			if e.kind != kindUser && e.msg.Workspace == run && slices.Contains(e.msg.Files, p) {
				return true
			}
		}
	}
	return false
}

// serveFile is GET /files/{run}/{path...}.
func (a *Adapter) serveFile(w http.ResponseWriter, r *http.Request) {
	run, p := r.PathValue("run"), r.PathValue("path")
	who, _ := requestIdentity(r)
	notFound := func() { writeError(w, http.StatusNotFound, "no such file") }
	if a.workspace == nil || run == "" || !cleanFilePath(p) {
		notFound()
		return
	}
	a.mu.Lock()
	ok := a.listed(who, run, p)
	a.mu.Unlock()
	if !ok {
		notFound()
		return
	}
	f, err := openInWorkspace(a.workspace(run), p)
	if err != nil {
		a.log.Info("web console: file view refused", "run", run, "path", p, "err", err)
		notFound()
		return
	}
	defer f.Close()
	hd := w.Header()
	hd.Set("Content-Type", "text/plain; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	// The file is the run's, not the console's: even shown as text, it gets no rights.
	hd.Set("Content-Security-Policy", "sandbox; default-src 'none'")
	io.Copy(w, io.LimitReader(f, maxFileView))
}

// errSymlink refuses a path with a symlink in it.
var errSymlink = errors.New("the path goes through a symlink")

// openInWorkspace opens the regular file p of the workspace dir, refusing a path with a
// symlink anywhere in it and anything os.Root finds outside dir.
func openInWorkspace(dir, p string) (*os.File, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	parts := strings.Split(p, "/")
	for i := range parts {
		fi, err := root.Lstat(strings.Join(parts[:i+1], "/"))
		if err != nil {
			return nil, err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil, errSymlink
		}
	}
	f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, errors.New("not a regular file")
	}
	return f, nil
}
