package bot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/loopbot/loopbot/agent"
	"go.yaml.in/yaml/v3"
)

// Save as playbook (seed 003's plan caching): a completed run's answer has a button that
// writes a draft playbook from the run's goal, plan and the tools it used. Only approvers
// may save, since a playbook is a standing instruction for later runs. The draft goes to
// the drafts directory under the playbooks directory, named draft-<run>, where nothing
// runs it; an approver activates it by naming it (the name line and the file's name) and
// moving it up into the playbooks directory. The thread is told where it is and how.

// draftsDir is where saved drafts wait, under the playbooks directory.
const draftsDir = "drafts"

const (
	noticeSaveApprovers = "Only loopbot's approvers can save a run as a playbook."
	noticeSaveOff       = "Playbooks are not configured, so there is nowhere to save one."
)

// draftFront is the front matter of a draft as written; yaml quotes what needs it.
type draftFront struct {
	Name        string   `yaml:"name"`
	Description string   `yaml:"description"`
	Steps       []string `yaml:"steps,omitempty"`
	Tools       []string `yaml:"tools"`
}

// draftPlaybook writes the playbook text for the completed run st, named name.
func draftPlaybook(name string, st *agent.State) ([]byte, error) {
	// A brace pair of the run's own text is not a parameter of the draft.
	literal := func(s string) string { return strings.ReplaceAll(s, "{{", "{ {") }
	goal := strings.TrimSpace(literal(st.Goal))
	desc, _, _ := strings.Cut(goal, "\n")
	front := draftFront{Name: name, Description: clip(desc, maxDescription-40), Tools: []string{}}
	for _, it := range st.Plan {
		if len(front.Steps) < maxPlaybookSteps {
			// One line a step: a checklist item needs no more, and YAML's emitter writes a
			// step that starts with a line break in a form its own parser refuses.
			step := strings.Join(strings.Fields(literal(it.Step)), " ")
			if step != "" {
				front.Steps = append(front.Steps, clip(step, maxStepBytes))
			}
		}
	}
	for _, c := range st.Calls {
		if c.Status == agent.CallSucceeded && c.Name != "update_plan" && c.Name != "ask_user" && !slices.Contains(front.Tools, c.Name) {
			front.Tools = append(front.Tools, c.Name)
		}
	}
	fm, err := yaml.Marshal(front)
	if err != nil {
		return nil, fmt.Errorf("write front matter: %w", err)
	}
	var b strings.Builder
	b.WriteString("---\n")
	b.Write(fm)
	b.WriteString("---\n")
	b.WriteString(strings.ReplaceAll(goal, "\n---\n", "\n- - -\n"))
	b.WriteString("\n")
	return []byte(b.String()), nil
}

// savePlaybook handles a Save as playbook click.
func (b *Bot) savePlaybook(ctx context.Context, who User, from ThreadRef, act *Action) (Result, error) {
	if b.cfg.Playbooks.Dir == "" {
		return Result{Notice: noticeSaveOff}, nil
	}
	if !slices.Contains(b.cfg.Policy.Approvers, who.ID) {
		return Result{Notice: noticeSaveApprovers}, nil
	}
	var rec *RunRecord
	err := b.store.View(ctx, func(tx Tx) error {
		var err error
		rec, err = tx.Run(act.RunID)
		return err
	})
	if err != nil {
		return Result{}, err
	}
	switch {
	case !fromThread(from, rec.Thread):
		return Result{Notice: noticeOtherThread}, nil
	case rec.Status != agent.StatusCompleted || rec.SaveAction != act.ID:
		return Result{Notice: noticeInvalid}, nil
	}
	id := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, strings.ToLower(rec.ID))
	name := "draft-" + id[:min(len(id), 12)]
	rel := filepath.Join(draftsDir, name+".md")
	path := filepath.Join(b.cfg.Playbooks.Dir, rel)
	text, err := draftPlaybook(name, rec.State)
	if err == nil {
		_, err = ParsePlaybook(path, text, b.toolNames)
	}
	if err != nil {
		b.log.Error("draft playbook does not parse", "run", rec.ID, "err", err)
		return Result{Notice: "This run cannot be saved as a playbook; the log says why."}, nil
	}
	switch err := writeNew(path, text); {
	case errors.Is(err, os.ErrExist):
		return Result{Notice: "Already saved as " + rel + "."}, nil
	case err != nil:
		b.log.Error("write draft playbook", "path", path, "err", err)
		return Result{Notice: "The draft could not be written; the log says why."}, nil
	}
	note := fmt.Sprintf("%s saved this run as a draft playbook, %s, in the playbooks directory. Nothing runs a draft: "+
		"to use it, give it a name (the name line and the file's name, NAME.md), check its steps and tools, and move it up "+
		"out of drafts; then /loopbot run NAME starts it.", displayName(who), rel)
	err = b.store.Update(ctx, func(tx Tx) error {
		now := b.clock.stamp()
		if err := tx.AppendAudit(AuditEntry{At: now, Actor: who, Action: "save_playbook", RunID: rec.ID, Detail: rel}); err != nil {
			return err
		}
		return b.recs.put(tx, rec.Thread, now, noticeItem(rec.ID, b.newID(), note))
	})
	return Result{RunID: rec.ID, Notice: "Saved as " + rel + "."}, err
}

// writeNew writes a file that must not exist yet, whole or not at all: the text goes to a
// temporary file first, which is linked to path only if nothing is there.
func writeNew(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".draft-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Link(tmp.Name(), path)
}
