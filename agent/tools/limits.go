package tools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/loopbot/loopbot/internal/lazyre"
)

// Default resource limits of one shell command and of one run's workspace.
const (
	defaultMemoryMiB      = 1024
	defaultProcesses      = 256
	defaultFileSizeMiB    = 256
	defaultTmpMiB         = 256
	defaultWorkspaceMiB   = 1024
	defaultWorkspaceFiles = 100_000
)

// LimitsConfig is [tools.limits]: what one shell command may use, and how much one run's
// workspace may hold. The zero value of a field means its default.
type LimitsConfig struct {
	// MemoryMiB bounds the memory of one command (default 1024): each process's data
	// (RLIMIT_DATA), and all its processes together where a cgroup memory controller is
	// writable.
	MemoryMiB int64 `toml:"memory_mib"`
	// Processes bounds the processes and threads of one command (default 256), through a
	// cgroup's pids.max where one is writable; elsewhere only through RLIMIT_NPROC, which is
	// counted per user and which root ignores.
	Processes int64 `toml:"processes"`
	// FileSizeMiB bounds the size of any one file a command writes (default 256), through
	// RLIMIT_FSIZE.
	FileSizeMiB int64 `toml:"file_size_mib"`
	// TmpMiB bounds the size of the sandbox's /tmp, a tmpfs (default 256).
	TmpMiB int64 `toml:"tmp_mib"`
	// WorkspaceMiB bounds the disk use of one run's workspace (default 1024). A command that
	// makes the workspace grow past it is killed, and write_file refuses content that would.
	WorkspaceMiB int64 `toml:"workspace_mib"`
	// WorkspaceFiles bounds the number of files and directories of one run's workspace
	// (default 100000), checked like WorkspaceMiB.
	WorkspaceFiles int64 `toml:"workspace_files"`
}

func orDefault(v, def int64) int64 {
	if v <= 0 {
		return def
	}
	return v
}

func (l LimitsConfig) memory() int64    { return orDefault(l.MemoryMiB, defaultMemoryMiB) << 20 }
func (l LimitsConfig) processes() int64 { return orDefault(l.Processes, defaultProcesses) }
func (l LimitsConfig) fileSize() int64  { return orDefault(l.FileSizeMiB, defaultFileSizeMiB) << 20 }
func (l LimitsConfig) tmp() int64       { return orDefault(l.TmpMiB, defaultTmpMiB) << 20 }
func (l LimitsConfig) workspace() int64 { return orDefault(l.WorkspaceMiB, defaultWorkspaceMiB) << 20 }
func (l LimitsConfig) workspaceFiles() int64 {
	return orDefault(l.WorkspaceFiles, defaultWorkspaceFiles)
}

// validate reports the limits that cannot be meant.
func (l LimitsConfig) validate() []error {
	var errs []error
	for _, f := range []struct {
		key string
		v   int64
	}{
		{"memory_mib", l.MemoryMiB}, {"processes", l.Processes}, {"file_size_mib", l.FileSizeMiB},
		{"tmp_mib", l.TmpMiB}, {"workspace_mib", l.WorkspaceMiB}, {"workspace_files", l.WorkspaceFiles},
	} {
		switch {
		case f.v < 0:
			errs = append(errs, fmt.Errorf("tools.limits.%s: must not be negative", f.key))
		case f.v > 1<<40:
			errs = append(errs, fmt.Errorf("tools.limits.%s: %d is too large", f.key, f.v))
		}
	}
	return errs
}

// mib writes a byte count in MiB for messages, with one decimal when it is not whole.
func mib(n int64) string {
	if n%(1<<20) == 0 {
		return strconv.FormatInt(n>>20, 10) + " MiB"
	}
	return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
}

// ErrLimit is wrapped by every tool error that reports a resource limit hit.
var ErrLimit = errors.New("resource limit reached")

// prlimitArgs returns the prlimit(1) command line that sets the per-process limits of a
// command and then runs it. RLIMIT_NPROC is set only when no cgroup bounds the processes.
func prlimitArgs(bin string, l LimitsConfig, withNproc bool) []string {
	args := []string{bin,
		fmt.Sprintf("--data=%d:%d", l.memory(), l.memory()),
		fmt.Sprintf("--fsize=%d:%d", l.fileSize(), l.fileSize()),
	}
	if withNproc {
		args = append(args, fmt.Sprintf("--nproc=%d:%d", l.processes(), l.processes()))
	}
	return append(args, "--")
}

// lookPrlimit finds prlimit(1), from util-linux.
func lookPrlimit() (string, error) {
	p, err := exec.LookPath("prlimit")
	if err != nil {
		return "", fmt.Errorf("shell refused: prlimit (from util-linux) is needed to set the command's resource limits: %w", err)
	}
	return p, nil
}

// Signs in a command's standard error that a program ran out of memory or space.
var (
	outOfMemoryRE = lazyre.New(`(?i)cannot allocate memory|out of memory|memory exhausted|MemoryError|bad_alloc`)
	noSpaceRE     = lazyre.New(`(?i)no space left on device`)
	// /bin/sh reports a program killed by SIGXFSZ so; a program that ignores the signal gets
	// EFBIG instead.
	fileSizeRE = lazyre.New(`File size limit exceeded|File too large`)
)

// limitErrors explains, naming each limit and its config key, the limits a finished command
// hit. cg holds what the command's cgroups counted; it may be the zero value. diskFull says
// the workspace's own file system is full, so that a lack of space is not blamed on /tmp.
func limitErrors(l LimitsConfig, ps *os.ProcessState, stderr string, cg cgroupEvents, diskFull bool) []error {
	var errs []error
	hit := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrLimit}, args...)...))
	}
	if ps != nil && exceededFileSize(ps) || fileSizeRE.MatchString(stderr) {
		hit("a file grew past the file size limit of %s (tools.limits.file_size_mib)", mib(l.fileSize()))
	}
	switch {
	case cg.oomKills > 0:
		hit("the command was killed at the memory limit of %s (tools.limits.memory_mib)", mib(l.memory()))
	case ps != nil && ps.ExitCode() != 0 && outOfMemoryRE.MatchString(stderr):
		hit("a program ran out of memory; each process may use %s (tools.limits.memory_mib)", mib(l.memory()))
	}
	if cg.pidsMax > 0 {
		hit("the command could not start more processes: the limit is %d processes and threads (tools.limits.processes)", l.processes())
	}
	switch {
	case !noSpaceRE.MatchString(stderr):
	case diskFull:
		errs = append(errs, errors.New("the disk that holds the workspace is full"))
	default:
		hit("a write ran out of space, and the workspace's disk has room: the sandbox's /tmp holds at most %s (tools.limits.tmp_mib)", mib(l.tmp()))
	}
	return errs
}

// exceededFileSize reports whether the command ended by SIGXFSZ, the signal of RLIMIT_FSIZE,
// or /bin/sh reported that one of its programs did (exit code 128+SIGXFSZ).
func exceededFileSize(ps *os.ProcessState) bool {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGXFSZ {
		return true
	}
	return ps.ExitCode() == 128+int(syscall.SIGXFSZ)
}

// diskFull reports whether the file system of dir has less than 1 MiB left.
func diskFull(dir string) bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return false
	}
	return int64(st.Bavail)*st.Bsize < 1<<20
}

// usage is what a workspace holds.
type usage struct {
	bytes int64 // disk use, in blocks actually allocated
	files int64 // files, directories and links
}

// usage measures a run's workspace. The walk stops once it has counted more entries than
// the limit allows, so a workspace flooded with files costs no more than that to measure.
func (w *Workspaces) usage(ctx context.Context, dir string) (usage, error) {
	var u usage
	maxFiles := w.limits.workspaceFiles()
	errEnough := errors.New("enough")
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while we walked
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		u.files++
		if u.files > maxFiles {
			return errEnough
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			u.bytes += st.Blocks * 512
		} else {
			u.bytes += info.Size()
		}
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		return u, fmt.Errorf("measure workspace: %w", err)
	}
	return u, nil
}

// over explains how u exceeds the workspace limits, or returns nil.
func (w *Workspaces) over(u usage) error {
	switch {
	case u.bytes > w.limits.workspace():
		return fmt.Errorf("%w: the workspace uses %s, more than its limit of %s (tools.limits.workspace_mib); delete files to go on",
			ErrLimit, mib(u.bytes), mib(w.limits.workspace()))
	case u.files > w.limits.workspaceFiles():
		return fmt.Errorf("%w: the workspace holds more than %d files and directories (tools.limits.workspace_files); delete some to go on",
			ErrLimit, w.limits.workspaceFiles())
	}
	return nil
}

// grown reports whether now is over the limits and larger than before, in the measure that is
// over: a command may shrink a workspace that is over its limit, never grow it.
func (w *Workspaces) grown(before, now usage) error {
	err := w.over(now)
	if err == nil {
		return nil
	}
	if now.bytes > w.limits.workspace() && now.bytes > before.bytes ||
		now.files > w.limits.workspaceFiles() && now.files > before.files {
		return err
	}
	return nil
}

// fits checks that writing n bytes to the path p of a run's workspace, replacing what is
// there, keeps the workspace within its limits or at least does not grow it past them.
func (w *Workspaces) fits(ctx context.Context, root *os.Root, runID, p string, n int64) error {
	dir, err := w.Dir(runID)
	if err != nil {
		return err
	}
	before, err := w.usage(ctx, dir)
	if err != nil {
		return err
	}
	after := before
	if fi, err := root.Lstat(p); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			after.bytes -= st.Blocks * 512
		}
	} else {
		after.files++
	}
	after.bytes += n
	if err := w.grown(before, after); err != nil {
		return fmt.Errorf("write_file refused: %w", err)
	}
	return nil
}
