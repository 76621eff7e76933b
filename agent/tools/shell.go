package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/loopbot/loopbot/agent"
)

var _ agent.Tool = (*Shell)(nil)

const (
	defaultShellTimeout = 60 * time.Second
	defaultShellOutput  = 64 << 10
	sandboxPath         = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// ErrNoSandbox is returned when bubblewrap is missing and unsandboxed runs are not allowed.
var ErrNoSandbox = errors.New("bubblewrap (bwrap) is not available")

// Shell is the shell tool: it runs a command with /bin/sh -c in the run's workspace, inside a
// bubblewrap sandbox whose only writable place is that workspace.
type Shell struct {
	cfg    ShellConfig
	limits LimitsConfig
	ws     *Workspaces
	// groups are where the command's cgroups are made; nil means none.
	groups *cgroups
	// poll is how often the workspace's use is measured while a command runs.
	poll time.Duration
}

// NewShell returns the shell tool over the given workspaces. Every command runs within the
// given limits; see LimitsConfig.
func NewShell(ws *Workspaces, cfg ShellConfig, limits LimitsConfig) *Shell {
	return &Shell{cfg: cfg, limits: limits, ws: ws, groups: detectCgroups(), poll: 250 * time.Millisecond}
}

func (t *Shell) timeout() time.Duration { return durationOr(t.cfg.Timeout, defaultShellTimeout) }

// Info describes shell. Its Timeout leaves the tool's own limit room to fire first, so the
// model sees the output collected before the kill.
func (t *Shell) Info() agent.ToolInfo {
	network := "no network access"
	if t.cfg.AllowNetwork {
		network = "network access"
	}
	return agent.ToolInfo{
		Spec: agent.ToolSpec{
			Name: "shell",
			Description: fmt.Sprintf("Run a command with /bin/sh -c in the workspace directory (the current directory), in a sandbox "+
				"with a read-only system, a fresh /tmp and %s. Only the workspace is writable. The command is killed after %s. "+
				"The result gives the exit code, stdout and stderr. Limits: %s of memory a process, %d processes, "+
				"files up to %s, %s in /tmp, %s and %d files in the workspace.",
				network, t.timeout(), mib(t.limits.memory()), t.limits.processes(), mib(t.limits.fileSize()),
				mib(t.limits.tmp()), mib(t.limits.workspace()), t.limits.workspaceFiles()),
			Parameters: json.RawMessage(`{"type":"object","properties":{` +
				`"command":{"type":"string","description":"the shell command line"}},` +
				`"required":["command"],"additionalProperties":false}`),
		},
		Timeout:   t.timeout() + 5*time.Second,
		Untrusted: true,
		Executes:  true,
	}
}

// Assess rates the command line; see AssessCommand.
func (t *Shell) Assess(raw json.RawMessage) agent.Assessment { return raise(t.assess(raw), t.cfg.Risk) }

func (t *Shell) assess(raw json.RawMessage) agent.Assessment {
	var args struct {
		Command string `json:"command"`
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return agent.Assessment{Risk: agent.RiskConfirm, Reason: "arguments could not be read"}
	}
	as := AssessCommand(args.Command, t.cfg.SafeReadonly)
	if t.cfg.AllowNetwork {
		// With the network shared, any command can send what the run can see anywhere.
		as.Sends, as.Carries = "the network", true
	}
	return as
}

// Call runs the command. A command that ran to its end, whatever its exit code, is a result
// for the model; a kill at the time limit or a sandbox that cannot start is an error.
func (t *Shell) Call(ctx context.Context, inv agent.Invocation) (string, error) {
	var args struct {
		Command string `json:"command"`
	}
	if err := json.Unmarshal(inv.Args, &args); err != nil {
		return "", fmt.Errorf("shell arguments: %w", err)
	}
	if strings.TrimSpace(args.Command) == "" {
		return "", errors.New("empty command")
	}
	dir, err := t.ws.Dir(inv.RunID)
	if err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("command not started: %w", err)
	}
	name, argv, err := t.commandLine(dir, args.Command)
	if err != nil {
		return "", err
	}
	prlimit, err := lookPrlimit()
	if err != nil {
		return "", err
	}
	before, err := t.ws.usage(ctx, dir)
	if err != nil {
		return "", err
	}
	var cg *commandCgroup
	if t.groups != nil && len(t.groups.hiers) > 0 {
		if cg, err = t.groups.create(t.limits); err != nil {
			return "", err
		}
		defer cg.remove()
	}
	withNproc := t.groups == nil || !t.groups.pids()
	full := cg.joinArgs(append(prlimitArgs(prlimit, t.limits, withNproc), append([]string{name}, argv...)...))
	ctx, cancel := context.WithTimeout(ctx, t.timeout())
	defer cancel()

	cmd := exec.CommandContext(ctx, full[0], full[1:]...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + sandboxPath, "HOME=" + dir, "LANG=C.UTF-8", "TMPDIR=/tmp"}
	// The command leads its own process group, so the kill reaches every process it
	// started, not only the first. Under bubblewrap the pid namespace and --die-with-parent
	// take care of the rest.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// Children that escaped the group could keep the output pipes open; Wait gives up on
	// them after this long.
	cmd.WaitDelay = 2 * time.Second
	limit := t.cfg.MaxOutput
	if limit <= 0 {
		limit = defaultShellOutput
	}
	stdout, stderr := &cappedBuffer{max: limit}, &cappedBuffer{max: limit}
	cmd.Stdout, cmd.Stderr = stdout, stderr

	if err := cmd.Start(); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("command not started: %w", ctx.Err())
		}
		return "", fmt.Errorf("start command: %w", err)
	}
	grew := make(chan error, 1)
	stopWatch := make(chan struct{})
	go func() { grew <- t.watchWorkspace(ctx, dir, before, cmd.Process.Pid, stopWatch) }()
	_ = cmd.Wait()
	close(stopWatch)
	wsErr := <-grew
	out := formatShell(cmd.ProcessState, stdout, stderr)
	switch {
	case wsErr != nil:
		return out, fmt.Errorf("command killed: %w", wsErr)
	case ctx.Err() != nil && errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		return out, fmt.Errorf("command killed after the %s time limit, with all its processes", t.timeout())
	case ctx.Err() != nil:
		return out, fmt.Errorf("command stopped: %w", ctx.Err())
	}
	errs := limitErrors(t.limits, cmd.ProcessState, stderr.String(), cg.events(), diskFull(dir))
	// A command may fill the workspace faster than it is measured, and end before the next
	// measure.
	if after, err := t.ws.usage(context.WithoutCancel(ctx), dir); err == nil {
		if err := t.ws.grown(before, after); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return out, errors.Join(errs...)
	}
	return out, nil
}

// watchWorkspace measures the workspace while the command runs and kills the command's
// process group when the workspace grows past its limits. It returns the limit's error, or
// nil once stop is closed.
func (t *Shell) watchWorkspace(ctx context.Context, dir string, before usage, pid int, stop <-chan struct{}) error {
	tick := time.NewTicker(t.poll)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		now, err := t.ws.usage(ctx, dir)
		if err != nil {
			continue
		}
		if err := t.ws.grown(before, now); err != nil {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			return err
		}
	}
}

// commandLine returns the program and arguments that run the command: bubblewrap around
// /bin/sh, or /bin/sh alone where config allows it and bubblewrap is missing.
func (t *Shell) commandLine(dir, command string) (string, []string, error) {
	bin := t.cfg.Bwrap
	if bin == "" {
		bin = "bwrap"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		if !t.cfg.AllowUnsandboxed {
			return "", nil, fmt.Errorf("shell refused: %w (looked for %q: %v); install bubblewrap, or set tools.shell.allow_unsandboxed = true to run commands without a sandbox", ErrNoSandbox, bin, err)
		}
		return "/bin/sh", []string{"-c", command}, nil
	}
	return path, bwrapArgs(t.cfg, t.limits, dir, command), nil
}

// etcFiles are the parts of /etc programs need to run; the rest (shadow, keys, the bot's own
// config) stays out of the sandbox.
var etcFiles = []string{
	"/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/passwd", "/etc/group",
	"/etc/nsswitch.conf", "/etc/localtime", "/etc/hosts", "/etc/ssl", "/etc/ca-certificates", "/etc/mime.types",
	"/etc/os-release", "/etc/gitconfig",
}

// bwrapArgs builds the sandbox: the system read-only, /proc, /dev and a fresh /tmp, the
// workspace as the only writable bind, every namespace unshared (the network too, unless
// config shares it), all capabilities dropped, and a new session so the command cannot
// reach the bot's terminal.
func bwrapArgs(cfg ShellConfig, limits LimitsConfig, dir, command string) []string {
	args := []string{
		"--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL",
		"--clearenv", "--setenv", "PATH", sandboxPath, "--setenv", "HOME", dir, "--setenv", "LANG", "C.UTF-8",
		"--setenv", "TMPDIR", "/tmp", "--hostname", "sandbox",
		"--ro-bind", "/usr", "/usr",
	}
	if cfg.AllowNetwork {
		args = append(args, "--share-net", "--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf")
	}
	for _, p := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		// Merged-/usr systems make these symlinks into /usr; they must stay symlinks.
		if target, err := os.Readlink(p); err == nil {
			args = append(args, "--symlink", target, p)
		} else {
			args = append(args, "--ro-bind-try", p, p)
		}
	}
	for _, p := range etcFiles {
		args = append(args, "--ro-bind-try", p, p)
	}
	for _, p := range cfg.ReadOnlyPaths {
		args = append(args, "--ro-bind-try", p, p)
	}
	args = append(args,
		"--proc", "/proc", "--dev", "/dev", "--size", strconv.FormatInt(limits.tmp(), 10), "--tmpfs", "/tmp",
		"--bind", dir, dir, "--chdir", dir,
		"--", "/bin/sh", "-c", command)
	return args
}

// cappedBuffer keeps the first max bytes written to it and counts the rest.
type cappedBuffer struct {
	buf     []byte
	max     int
	dropped int64
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	n := min(len(p), c.max-len(c.buf))
	c.buf = append(c.buf, p[:n]...)
	c.dropped += int64(len(p) - n)
	return len(p), nil
}

func (c *cappedBuffer) String() string { return strings.ToValidUTF8(string(c.buf), "\uFFFD") }

func formatShell(ps *os.ProcessState, stdout, stderr *cappedBuffer) string {
	var b strings.Builder
	switch {
	case ps == nil:
		b.WriteString("exit code: none (the command did not start)\n")
	case ps.ExitCode() >= 0:
		fmt.Fprintf(&b, "exit code: %d\n", ps.ExitCode())
	default:
		fmt.Fprintf(&b, "exit code: -1 (%s)\n", ps.String())
	}
	for _, s := range []struct {
		name string
		buf  *cappedBuffer
	}{{"stdout", stdout}, {"stderr", stderr}} {
		if len(s.buf.buf) == 0 && s.buf.dropped == 0 {
			continue
		}
		fmt.Fprintf(&b, "--- %s ---\n%s", s.name, s.buf.String())
		if !strings.HasSuffix(s.buf.String(), "\n") {
			b.WriteByte('\n')
		}
		if s.buf.dropped > 0 {
			fmt.Fprintf(&b, "[%s truncated: %d more bytes not shown]\n", s.name, s.buf.dropped)
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}
