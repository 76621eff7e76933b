package bot

import (
	"errors"
	"fmt"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// Who may approve a tool call (Policy.ApproveBy).
const (
	// ApproveByRequester: the person who started the run, or any listed approver.
	ApproveByRequester = "requester"
	// ApproveByApprovers: only the listed approvers.
	ApproveByApprovers = "approvers"
	// ApproveByChannel: anyone in the channel who may use the bot.
	ApproveByChannel = "channel"
)

// minDedupeTTL is the shortest dedupe window allowed: Slack retries a delivery for up to
// about an hour, and a shorter window would let a retry start a second run.
const minDedupeTTL = time.Hour

// minLeaseTTL is the shortest lease allowed: a lease is renewed every third of it, and a
// shorter one would be lost to a slow transaction.
const minLeaseTTL = 3 * time.Second

// Config holds the bot's limits and policies. Zero fields take their defaults (Defaults).
// Its toml tags are the keys of the [bot] section of loopbot's configuration file, which
// embeds it as it is.
type Config struct {
	// MaxConcurrentRuns bounds the runs worked on at once; more wait, queued, in order.
	MaxConcurrentRuns int `toml:"max_concurrent_runs"`
	// EditInterval is the least time between two calls to one channel (posts and edits).
	EditInterval agent.Duration `toml:"edit_interval"`
	// DedupeTTL is how long an inbound delivery ID is remembered; at least an hour.
	DedupeTTL agent.Duration `toml:"dedupe_ttl"`
	Policy    Policy         `toml:"policy"`
	// Redact lists extra secret values (such as configured tokens) that must never be posted.
	Redact []string `toml:"redact"`
	// MaxGoalBytes bounds a goal or a reply as a person sends it; a longer one is refused
	// with a notice before anything stores it.
	MaxGoalBytes int `toml:"max_goal_bytes"`
	// ReplicaID names this process among replicas that share a store; empty means the
	// host's name, the process ID and a random suffix.
	ReplicaID string `toml:"replica_id"`
	// LeaseTTL is how long a replica's lease on a run, and the leadership of the dispatcher
	// and the sweeper, last without renewal: a replica that stops is taken over after it.
	LeaseTTL agent.Duration `toml:"lease_ttl"`
	// Memory bounds each channel's memory (memory.go).
	Memory MemoryConfig `toml:"memory"`
	// Playbooks says where playbooks live (playbook.go).
	Playbooks PlaybookConfig `toml:"playbooks"`
	// GCMemoryMB is the most memory, in MB, the Go runtime may use before it collects
	// garbage while many runs are in flight: 1 MB for each run in flight, in steps of
	// 16 MB, up to this (gcpacer.go). A negative value keeps the runtime's default pacing
	// throughout.
	GCMemoryMB int `toml:"gc_memory_mb"`
}

// defaultGCMemoryMB is GCMemoryMB's default.
const defaultGCMemoryMB = 120

// Policy says who may use the bot and who may decide on tool calls. Users are matched by
// their platform user ID.
type Policy struct {
	// AllowedChannels and AllowedUsers limit who may start runs; empty allows everyone.
	AllowedChannels []string `toml:"allowed_channels"`
	AllowedUsers    []string `toml:"allowed_users"`
	// Approvers may approve or reject any run's calls (and cancel any run).
	Approvers []string `toml:"approvers"`
	// ApproveBy is requester, approvers or channel.
	ApproveBy string `toml:"approve_by"`
	// DangerousNeedsOther makes a dangerous call need an approver other than the requester.
	// It is a pointer so that leaving it out of the file means the safe default, true.
	DangerousNeedsOther *bool `toml:"dangerous_needs_other"`
	// ApprovalExpiry is how long an approval request waits before it counts as rejected.
	ApprovalExpiry agent.Duration `toml:"approval_expiry"`
}

// Defaults returns c with every unset field at its default.
func (c Config) Defaults() Config {
	if c.MaxConcurrentRuns == 0 {
		c.MaxConcurrentRuns = 8
	}
	if c.EditInterval == 0 {
		c.EditInterval = agent.Duration(time.Second)
	}
	if c.DedupeTTL == 0 {
		c.DedupeTTL = agent.Duration(2 * time.Hour)
	}
	if c.MaxGoalBytes == 0 {
		c.MaxGoalBytes = 16 << 10
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = agent.Duration(30 * time.Second)
	}
	c.Memory = c.Memory.defaults()
	if c.GCMemoryMB == 0 {
		c.GCMemoryMB = defaultGCMemoryMB
	}
	if c.Policy.ApproveBy == "" {
		c.Policy.ApproveBy = ApproveByRequester
	}
	if c.Policy.DangerousNeedsOther == nil {
		yes := true
		c.Policy.DangerousNeedsOther = &yes
	}
	if c.Policy.ApprovalExpiry == 0 {
		c.Policy.ApprovalExpiry = agent.Duration(30 * time.Minute)
	}
	return c
}

// Check reports a configuration the bot cannot work with.
func (c Config) Check() error {
	switch c.Policy.ApproveBy {
	case "", ApproveByRequester, ApproveByApprovers, ApproveByChannel:
	default:
		return fmt.Errorf("approve_by %q: want %q, %q or %q", c.Policy.ApproveBy, ApproveByRequester, ApproveByApprovers, ApproveByChannel)
	}
	switch {
	case c.MaxConcurrentRuns < 0:
		return errors.New("max_concurrent_runs must not be negative")
	case c.MaxGoalBytes < 0:
		return errors.New("max_goal_bytes must not be negative")
	case c.Memory.MaxFacts < 0 || c.Memory.MaxFactBytes < 0:
		return errors.New("memory caps must not be negative")
	case c.EditInterval < 0 || c.Policy.ApprovalExpiry < 0:
		return errors.New("durations must not be negative")
	case c.LeaseTTL != 0 && time.Duration(c.LeaseTTL) < minLeaseTTL:
		return fmt.Errorf("lease_ttl %s: want at least %s", time.Duration(c.LeaseTTL), minLeaseTTL)
	case c.DedupeTTL != 0 && time.Duration(c.DedupeTTL) < minDedupeTTL:
		return fmt.Errorf("dedupe_ttl %s: want at least %s, since platforms retry deliveries for that long", time.Duration(c.DedupeTTL), minDedupeTTL)
	case c.Policy.ApproveBy == ApproveByApprovers && len(c.Policy.Approvers) == 0:
		return errors.New("approve_by = \"approvers\" needs at least one approver")
	}
	return nil
}

// dangerousNeedsOther is the setting in force, true when unset.
func (p Policy) dangerousNeedsOther() bool {
	return p.DangerousNeedsOther == nil || *p.DangerousNeedsOther
}
