package bot

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/internal/lazyre"
	"go.yaml.in/yaml/v3"
)

// Playbooks (seed 003's workflows) are Markdown files with front matter in the configured
// directory, one playbook a file named after it:
//
//	---
//	name: deploy-check
//	description: Check that a service's last deploy is healthy
//	parameters:
//	  - name: service
//	    required: true
//	  - name: env
//	    default: staging
//	steps:
//	  - Read the deploy log of {{service}} in {{env}}
//	  - Check the health endpoint
//	tools: [http_fetch, read_file]
//	autonomy: careful
//	---
//	What the run should do, in Markdown; {{service}} stands for the parameter.
//
// "/loopbot run deploy-check service=api" starts a run whose goal is the body, whose plan is
// the steps, and which may call only the listed tools (all of them when tools is left out;
// none but the loop's own with tools: []). Parameters are data: a value is put in its slot
// as a quoted string, in one pass, so it can neither close its quotes nor bring in another
// placeholder. Drafts saved from a run (Save as playbook) wait in the drafts directory
// below, where nothing runs them, until an approver moves them up.

// Playbook is one parsed playbook file.
type Playbook struct {
	Name        string
	Description string
	Parameters  []PlaybookParam
	Steps       []string
	// Tools is the allowlist; nil allows every tool.
	Tools []string
	// Autonomy is the level the playbook asks for (careful, balanced or bold): its runs work
	// at it or at their channel's, whichever asks more; empty leaves the channel's.
	Autonomy string
	Body     string
	// File is the path it was read from.
	File string
}

// PlaybookParam is one parameter of a playbook.
type PlaybookParam struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	Required    bool   `yaml:"required"`
	Default     string `yaml:"default"`
}

// PlaybookConfig says where playbooks live.
type PlaybookConfig struct {
	// Dir holds the playbooks, NAME.md each; empty turns playbooks off. Save as playbook
	// writes drafts to its drafts directory.
	Dir string `toml:"dir"`
}

// Bounds of a playbook and of what a person passes to one.
const (
	maxPlaybookBytes   = 64 << 10
	maxPlaybookParams  = 20
	maxPlaybookSteps   = 30
	maxStepBytes       = 300 // update_plan's limit for one step
	maxParamValueBytes = 200
	maxDescription     = 300
)

var (
	playbookName = lazyre.New(`^[a-z0-9][a-z0-9-]{0,62}$`)
	paramName    = lazyre.New(`^[a-z][a-z0-9_]{0,31}$`)
	placeholder  = lazyre.New(`\{\{\s*([^{}]*?)\s*\}\}`)
	yamlLine     = lazyre.New(`line (\d+)`)
)

// playbookError is a problem with a playbook file, at a line of it when known.
type playbookError struct {
	file string
	line int
	msg  string
	// err is the error of reading the file, when that is what failed.
	err error
}

func (e *playbookError) Unwrap() error { return e.err }

func (e *playbookError) Error() string {
	if e.line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.file, e.line, e.msg)
	}
	return e.file + ": " + e.msg
}

// frontMatter is the front matter as written; Tools is a pointer so that a missing list
// (every tool) and an empty one (none) stay apart.
type frontMatter struct {
	Name        string          `yaml:"name"`
	Description string          `yaml:"description"`
	Parameters  []PlaybookParam `yaml:"parameters"`
	Steps       []string        `yaml:"steps"`
	Tools       *[]string       `yaml:"tools"`
	Autonomy    string          `yaml:"autonomy"`
}

// ParsePlaybook parses one playbook file. file names it in errors, which say the line.
// tools are the names the agent has; a playbook that allows another is refused.
func ParsePlaybook(file string, data []byte, tools []string) (*Playbook, error) {
	fail := func(line int, format string, args ...any) (*Playbook, error) {
		return nil, &playbookError{file: file, line: line, msg: fmt.Sprintf(format, args...)}
	}
	if len(data) > maxPlaybookBytes {
		return fail(0, "the file is %d bytes; a playbook may be at most %d", len(data), maxPlaybookBytes)
	}
	if !utf8.Valid(data) {
		return fail(0, "the file is not UTF-8 text")
	}
	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	if lines[0] != "---" {
		return fail(1, "a playbook starts with a line of three dashes, then its front matter")
	}
	end := slices.Index(lines[1:], "---") + 1
	if end == 0 {
		return fail(1, "the front matter has no closing line of three dashes")
	}
	front := strings.Join(lines[1:end], "\n")
	body := strings.Join(lines[end+1:], "\n")
	bodyLine := end + 2 // the file line the body starts at
	// Line n of the front matter is line n+1 of the file.
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(front), &root); err != nil {
		return fail(yamlErrorLine(err), "%s", yamlMessage(err))
	}
	var fm frontMatter
	dec := yaml.NewDecoder(bytes.NewReader([]byte(front)))
	dec.KnownFields(true)
	if err := dec.Decode(&fm); err != nil {
		return fail(yamlErrorLine(err), "%s", yamlMessage(err))
	}
	line := func(key string, index int) int { return keyLine(&root, key, index) }

	stem := strings.TrimSuffix(filepath.Base(file), ".md")
	switch {
	case !playbookName.MatchString(fm.Name):
		return fail(line("name", -1), "name %q: want lowercase letters, digits and dashes, up to 63", fm.Name)
	case fm.Name != stem:
		return fail(line("name", -1), "name %q differs from the file's name %q; name the file %s.md", fm.Name, stem, fm.Name)
	case strings.TrimSpace(fm.Description) == "":
		return fail(line("description", -1), "description: required, one line that says what the playbook does")
	case len(fm.Description) > maxDescription:
		return fail(line("description", -1), "description: at most %d bytes", maxDescription)
	case len(fm.Parameters) > maxPlaybookParams:
		return fail(line("parameters", -1), "at most %d parameters", maxPlaybookParams)
	case len(fm.Steps) > maxPlaybookSteps:
		return fail(line("steps", -1), "at most %d steps", maxPlaybookSteps)
	case fm.Autonomy != "" && !slices.Contains(agent.Levels, agent.Level(fm.Autonomy)):
		return fail(line("autonomy", -1), "autonomy %q: want careful, balanced or bold", fm.Autonomy)
	case strings.TrimSpace(body) == "" && len(fm.Steps) == 0:
		return fail(bodyLine, "the playbook says nothing to do: write its instructions below the front matter, or steps")
	}
	pb := &Playbook{Name: fm.Name, Description: strings.TrimSpace(fm.Description), Autonomy: fm.Autonomy,
		Body: strings.TrimSpace(body), File: file}
	declared := map[string]bool{}
	for i, p := range fm.Parameters {
		switch {
		case !paramName.MatchString(p.Name):
			return fail(line("parameters", i), "parameter %q: want a lowercase name of letters, digits and _", p.Name)
		case declared[p.Name]:
			return fail(line("parameters", i), "parameter %q is declared twice", p.Name)
		case p.Required && p.Default != "":
			return fail(line("parameters", i), "parameter %q is required and has a default; keep one", p.Name)
		}
		if err := checkValue(p.Default); err != nil {
			return fail(line("parameters", i), "the default of %q: %v", p.Name, err)
		}
		declared[p.Name] = true
		pb.Parameters = append(pb.Parameters, p)
	}
	for i, s := range fm.Steps {
		s = strings.TrimSpace(s)
		switch {
		case s == "":
			return fail(line("steps", i), "step %d is empty", i+1)
		case len(s) > maxStepBytes:
			return fail(line("steps", i), "step %d is %d bytes; a step may be at most %d", i+1, len(s), maxStepBytes)
		}
		if name := unknownPlaceholder(s, declared); name != "" {
			return fail(line("steps", i), "step %d uses {{%s}}, which is not a parameter", i+1, name)
		}
		pb.Steps = append(pb.Steps, s)
	}
	if name := unknownPlaceholder(pb.Body, declared); name != "" {
		at := bodyLine
		for i, l := range strings.Split(body, "\n") {
			if unknownPlaceholder(l, declared) == name {
				at = bodyLine + i
				break
			}
		}
		return fail(at, "the instructions use {{%s}}, which is not a parameter", name)
	}
	if fm.Tools != nil {
		pb.Tools = []string{}
		for i, name := range *fm.Tools {
			if !slices.Contains(tools, name) {
				return fail(line("tools", i), "tool %q: loopbot has no such tool (it has %s)", name, strings.Join(tools, ", "))
			}
			if !slices.Contains(pb.Tools, name) {
				pb.Tools = append(pb.Tools, name)
			}
		}
	}
	return pb, nil
}

// unknownPlaceholder returns the first {{name}} in s that is not a declared parameter.
func unknownPlaceholder(s string, declared map[string]bool) string {
	for _, m := range placeholder.FindAllStringSubmatch(s, -1) {
		if !declared[m[1]] {
			return m[1]
		}
	}
	return ""
}

// keyLine is the file line of the top-level key in the front matter, or of its index-th
// item when index is not negative; 0 when it is not there.
func keyLine(root *yaml.Node, key string, index int) int {
	doc := root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		doc = doc.Content[0]
	}
	if doc.Kind != yaml.MappingNode {
		return 0
	}
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value != key {
			continue
		}
		v := doc.Content[i+1]
		if index >= 0 && v.Kind == yaml.SequenceNode && index < len(v.Content) {
			return v.Content[index].Line + 1
		}
		return doc.Content[i].Line + 1
	}
	return 0
}

// yamlErrorLine is the file line of a YAML error, from the front matter's line it names.
func yamlErrorLine(err error) int {
	m := yamlLine.FindStringSubmatch(err.Error())
	if m == nil {
		return 1
	}
	n, _ := strconv.Atoi(m[1])
	return n + 1
}

// yamlMessage is a YAML error without its "yaml:" prefix and with its lines as the file's.
func yamlMessage(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.ReplaceAll(msg, "unmarshal errors:\n  ", "")
	return yamlLine.ReplaceAllStringFunc(msg, func(s string) string {
		n, _ := strconv.Atoi(strings.TrimPrefix(s, "line "))
		return "line " + strconv.Itoa(n+1)
	})
}

// checkValue refuses a parameter value that could break out of its slot's one line.
func checkValue(v string) error {
	switch {
	case len(v) > maxParamValueBytes:
		return fmt.Errorf("%d bytes; at most %d", len(v), maxParamValueBytes)
	case !utf8.ValidString(v):
		return errors.New("not UTF-8 text")
	case strings.ContainsFunc(v, unicode.IsControl):
		return errors.New("it holds a line break or a control character")
	}
	return nil
}

// LoadPlaybooks reads every NAME.md of dir (not its drafts). It returns the playbooks that
// parse, sorted by name, and one error for each file that does not, naming the file and
// the line. A missing directory has no playbooks.
func LoadPlaybooks(dir string, tools []string) ([]*Playbook, []error) {
	if dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []error{fmt.Errorf("read playbooks: %w", err)}
	}
	var pbs []*Playbook
	var errs []error
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".md") {
			continue
		}
		pb, err := readPlaybook(filepath.Join(dir, e.Name()), tools)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		pbs = append(pbs, pb)
	}
	sort.Slice(pbs, func(i, j int) bool { return pbs[i].Name < pbs[j].Name })
	return pbs, errs
}

// readPlaybook reads and parses one file; a file over the limit is read only far enough to
// tell. Errors name the file without its directory: they are shown in chat, where the
// server's paths are nobody's business, and the directory is the configured one.
func readPlaybook(path string, tools []string) (*Playbook, error) {
	name := filepath.Base(path)
	f, err := os.Open(path)
	if err != nil {
		return nil, &playbookError{file: name, msg: "cannot be read", err: err}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPlaybookBytes+1))
	if err != nil {
		return nil, &playbookError{file: name, msg: "cannot be read", err: err}
	}
	pb, err := ParsePlaybook(name, data, tools)
	if err != nil {
		return nil, err
	}
	pb.File = path
	return pb, nil
}
