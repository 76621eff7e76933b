package tools

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// cgroupHier is one cgroup directory under which a cgroup per shell command is made, and the
// controllers that bound it there.
type cgroupHier struct {
	dir          string
	v2           bool
	pids, memory bool
}

// cgroups are the places where the bot may make a cgroup per shell command, found under the
// bot's own cgroups: cgroup v2 where its controllers are delegated to the bot's cgroup, or the
// v1 pids and memory hierarchies where they are writable. A process limit that is real needs
// pids; without it, note says what is left.
type cgroups struct {
	hiers []cgroupHier
	note  string
}

func (c *cgroups) pids() bool {
	for _, h := range c.hiers {
		if h.pids {
			return true
		}
	}
	return false
}

func (c *cgroups) memory() bool {
	for _, h := range c.hiers {
		if h.memory {
			return true
		}
	}
	return false
}

var (
	detectOnce     sync.Once
	detectedGroups *cgroups
)

// detectCgroups finds, once, where per-command cgroups can be made.
func detectCgroups() *cgroups {
	detectOnce.Do(func() { detectedGroups = findCgroups("/proc/self/mounts", "/proc/self/cgroup") })
	return detectedGroups
}

func findCgroups(mountsFile, selfFile string) *cgroups {
	c := &cgroups{}
	own := map[string]string{} // controller ("" for v2) -> the bot's cgroup path
	if f, err := os.Open(selfFile); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			parts := strings.SplitN(sc.Text(), ":", 3)
			if len(parts) != 3 {
				continue
			}
			if parts[0] == "0" && parts[1] == "" {
				own[""] = parts[2]
				continue
			}
			for _, ctl := range strings.Split(parts[1], ",") {
				own[ctl] = parts[2]
			}
		}
		f.Close()
	}
	var v1 []cgroupHier
	var v2 *cgroupHier
	if f, err := os.Open(mountsFile); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 {
				continue
			}
			mnt, fstype, opts := fields[1], fields[2], strings.Split(fields[3], ",")
			switch fstype {
			case "cgroup2":
				if path, ok := own[""]; ok {
					v2 = &cgroupHier{dir: filepath.Join(mnt, path), v2: true}
				}
			case "cgroup":
				h := cgroupHier{}
				for _, o := range opts {
					switch o {
					case "pids":
						h.pids, h.dir = true, filepath.Join(mnt, own["pids"])
					case "memory":
						h.memory, h.dir = true, filepath.Join(mnt, own["memory"])
					}
				}
				if h.dir != "" {
					v1 = append(v1, h)
				}
			}
		}
		f.Close()
	}
	var why []string
	have := map[string]bool{}
	for _, h := range v1 {
		if (h.pids && have["pids"]) || (h.memory && have["memory"]) {
			continue
		}
		if err := probeCgroup(&h); err != nil {
			why = append(why, err.Error())
			continue
		}
		c.hiers = append(c.hiers, h)
		have["pids"] = have["pids"] || h.pids
		have["memory"] = have["memory"] || h.memory
	}
	if v2 != nil && (!have["pids"] || !have["memory"]) {
		if err := delegateV2(v2.dir, os.Getpid()); err != nil {
			why = append(why, err.Error())
		} else if err := probeCgroup(v2); err != nil {
			why = append(why, err.Error())
		} else {
			v2.pids = v2.pids && !have["pids"]
			v2.memory = v2.memory && !have["memory"]
			if v2.pids || v2.memory {
				c.hiers = append(c.hiers, *v2)
			}
		}
	}
	if !c.pids() {
		c.note = "no writable cgroup with the pids controller"
		if len(why) > 0 {
			c.note += " (" + strings.Join(why, "; ") + ")"
		}
		c.note += ": a shell command's processes are bounded only by RLIMIT_NPROC, which is counted per user and ignored for root"
	}
	return c
}

// probeCgroup makes and removes a cgroup under h.dir, and records which controllers bound it.
func probeCgroup(h *cgroupHier) error {
	dir := filepath.Join(h.dir, fmt.Sprintf("loopbot-probe-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("cannot make a cgroup under %s: %w", h.dir, err)
	}
	defer os.Remove(dir)
	if h.v2 {
		// A child's controllers are those its parent enables in cgroup.subtree_control.
		ctls, err := controllers(filepath.Join(h.dir, "cgroup.subtree_control"))
		if err != nil {
			return fmt.Errorf("cgroup %s: %w", h.dir, err)
		}
		h.pids, h.memory = ctls["pids"], ctls["memory"]
		if !h.pids && !h.memory {
			return fmt.Errorf("cgroup %s delegates neither pids nor memory (its cgroup.subtree_control)", h.dir)
		}
		return nil
	}
	for _, f := range h.files() {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return fmt.Errorf("cgroup %s: %w", h.dir, err)
		}
	}
	return nil
}

// controllers reads a cgroup v2 list of controllers, such as cgroup.controllers.
func controllers(path string) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, c := range strings.Fields(string(b)) {
		out[strings.TrimPrefix(c, "+")] = true
	}
	return out, nil
}

// delegateV2 makes the bot's own cgroup v2, dir, able to bound a cgroup per command with the
// pids and memory controllers it was delegated (systemd's Delegate=yes, a container's own
// cgroup). Controllers can be enabled for a cgroup's children only while no process lives in
// the cgroup itself, so when they are not enabled yet the bot first moves itself into a leaf,
// loopbot-main, the way container runtimes do. It does that only when it is alone in its
// cgroup: other processes are not its to move.
func delegateV2(dir string, self int) error {
	avail, err := controllers(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("cgroup %s: %w", dir, err)
	}
	enabled, err := controllers(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return fmt.Errorf("cgroup %s: %w", dir, err)
	}
	var enable []string
	for _, c := range []string{"pids", "memory"} {
		if avail[c] && !enabled[c] {
			enable = append(enable, "+"+c)
		}
	}
	switch {
	case !avail["pids"] && !avail["memory"]:
		return fmt.Errorf("cgroup %s is delegated neither the pids nor the memory controller", dir)
	case len(enable) == 0:
		return nil
	}
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return fmt.Errorf("cgroup %s: %w", dir, err)
	}
	procs := strings.Fields(string(b))
	for _, p := range procs {
		if p != strconv.Itoa(self) {
			return fmt.Errorf("cgroup %s holds processes other than the bot, so its controllers cannot be enabled", dir)
		}
	}
	if len(procs) > 0 {
		leaf := filepath.Join(dir, "loopbot-main")
		if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("make a cgroup for the bot under %s: %w", dir, err)
		}
		if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(self)), 0); err != nil {
			return fmt.Errorf("move the bot into %s: %w", leaf, err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.Join(enable, " ")), 0); err != nil {
		return fmt.Errorf("enable %s in %s: %w", strings.Join(enable, " "), dir, err)
	}
	return nil
}

// files are the limit files a command's cgroup in h needs.
func (h cgroupHier) files() []string {
	var fs []string
	if h.pids {
		fs = append(fs, "pids.max")
	}
	if h.memory && h.v2 {
		fs = append(fs, "memory.max")
	} else if h.memory {
		fs = append(fs, "memory.limit_in_bytes")
	}
	return fs
}

// commandCgroup is the cgroup of one command, one directory a hierarchy.
type commandCgroup struct {
	hiers []cgroupHier
	dirs  []string
}

// create makes the command's cgroups and writes its limits.
func (c *cgroups) create(l LimitsConfig) (*commandCgroup, error) {
	var b [8]byte
	rand.Read(b[:])
	name := "loopbot-shell-" + hex.EncodeToString(b[:])
	cg := &commandCgroup{}
	for _, h := range c.hiers {
		dir := filepath.Join(h.dir, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			cg.remove()
			return nil, fmt.Errorf("make the command's cgroup: %w", err)
		}
		cg.hiers, cg.dirs = append(cg.hiers, h), append(cg.dirs, dir)
		writes := map[string]int64{}
		optional := map[string]int64{}
		if h.pids {
			writes["pids.max"] = l.processes()
		}
		switch {
		case h.memory && h.v2:
			writes["memory.max"] = l.memory()
			optional["memory.swap.max"] = 0
		case h.memory:
			writes["memory.limit_in_bytes"] = l.memory()
			optional["memory.memsw.limit_in_bytes"] = l.memory()
		}
		for f, v := range writes {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(strconv.FormatInt(v, 10)), 0); err != nil {
				cg.remove()
				return nil, fmt.Errorf("set the command's %s: %w", f, err)
			}
		}
		// Without swap accounting these are missing; memory is bounded all the same, swap
		// aside.
		for f, v := range optional {
			_ = os.WriteFile(filepath.Join(dir, f), []byte(strconv.FormatInt(v, 10)), 0)
		}
	}
	return cg, nil
}

// procsFiles are the files a process writes its PID to, to join the command's cgroups.
func (cg *commandCgroup) procsFiles() []string {
	var fs []string
	for _, d := range cg.dirs {
		fs = append(fs, filepath.Join(d, "cgroup.procs"))
	}
	return fs
}

// joinArgs returns the command line that moves itself into the command's cgroups and then
// runs argv. The shell joins before it execs, so every process the command starts is born
// inside.
func (cg *commandCgroup) joinArgs(argv []string) []string {
	files := cg.procsFiles()
	if len(files) == 0 {
		return argv
	}
	const script = `n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || { echo "loopbot: cannot join the command's cgroup $1" >&2; exit 126; }; shift; n=$((n-1)); done; exec "$@"`
	args := []string{"/bin/sh", "-c", script, "loopbot-cgroup", strconv.Itoa(len(files))}
	args = append(args, files...)
	return append(args, argv...)
}

// cgroupEvents is what a command's cgroups counted.
type cgroupEvents struct {
	pidsMax  int64 // forks refused at pids.max
	oomKills int64 // processes killed at the memory limit
}

func (cg *commandCgroup) events() cgroupEvents {
	var ev cgroupEvents
	if cg == nil {
		return ev
	}
	for i, h := range cg.hiers {
		if h.pids {
			ev.pidsMax += readKey(filepath.Join(cg.dirs[i], "pids.events"), "max")
		}
		switch {
		case h.memory && h.v2:
			ev.oomKills += readKey(filepath.Join(cg.dirs[i], "memory.events"), "oom_kill")
		case h.memory:
			ev.oomKills += readKey(filepath.Join(cg.dirs[i], "memory.oom_control"), "oom_kill")
		}
	}
	return ev
}

// readKey reads the value of key from a cgroup file of "key value" lines, 0 when missing.
func readKey(path, key string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// remove kills what is left in the command's cgroups and removes them. The sandbox's processes
// die with it, but the kernel takes a moment to reap them, so the removal is retried for a
// while in the background.
func (cg *commandCgroup) remove() {
	if cg == nil || len(cg.dirs) == 0 {
		return
	}
	dirs := cg.dirs
	go func() {
		for try := 0; try < 50; try++ {
			var left []string
			for _, d := range dirs {
				killAll(d)
				if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
					left = append(left, d)
				}
			}
			if dirs = left; len(dirs) == 0 {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
}

// killAll kills every process of a cgroup.
func killAll(dir string) {
	if os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0) == nil {
		return
	}
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
