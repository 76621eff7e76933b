package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loopbot/loopbot/agent"
)

// An MCP server may ask for input from the user in the middle of a tool call (elicitation,
// form mode). loopbot relays the form to the run's thread one field at a time, as the
// ask_user tool's questions are: a field with a few choices (an enum, a yes/no) gets a button
// each, any other an answer in words, converted to the field's type. The person may skip an
// optional field or decline; nobody answering before the question expires, or the run
// stopping, cancels. The answer goes to the server only, never to the model, which reads in
// the call's result whether the server was answered. The call blocks meanwhile, within the
// server's tool timeout ([mcp] timeout), so a server that elicits wants a timeout long enough
// for a person. A restart while it waits loses the call like any call in flight: the run
// resumes and the thread and the model are told its outcome is unknown.

const (
	// maxFormFields bounds the questions of one form (the reference server's form has 13).
	maxFormFields = 16
	// maxAnswerTries is how often a field is asked again after an answer of the wrong type.
	maxAnswerTries = 3
)

// formField is one top-level property of a requested schema.
type formField struct {
	name, title, desc string
	typ               string // string, number, integer, boolean or array
	required          bool
	// values are an enum's allowed values and labels what the person sees for each
	// (oneOf's titles, or the values themselves); for an array, its items'.
	values, labels []string
}

// formFields reads the fields of a requested schema: an object of flat properties, as the
// MCP specification allows. They are asked required first, then by name.
func formFields(schema any) ([]formField, error) {
	raw, err := json.Marshal(schema)
	if err != nil {
		return nil, fmt.Errorf("read the requested schema: %w", err)
	}
	var s struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("read the requested schema: %w", err)
	}
	if s.Type != "object" || len(s.Properties) == 0 {
		return nil, errors.New("the requested schema is not an object with properties")
	}
	if len(s.Properties) > maxFormFields {
		return nil, fmt.Errorf("the form has %d fields; loopbot relays at most %d", len(s.Properties), maxFormFields)
	}
	var out []formField
	for name, pr := range s.Properties {
		f, err := readField(name, pr)
		if err != nil {
			return nil, err
		}
		f.required = slices.Contains(s.Required, name)
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b formField) int {
		if a.required != b.required {
			if a.required {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	return out, nil
}

type choice struct {
	Const string `json:"const"`
	Title string `json:"title"`
}

type property struct {
	Type        string   `json:"type"`
	Title       string   `json:"title"`
	Description string   `json:"description"`
	Enum        []string `json:"enum"`
	EnumNames   []string `json:"enumNames"`
	OneOf       []choice `json:"oneOf"`
	AnyOf       []choice `json:"anyOf"`
	Items       *struct {
		Enum  []string `json:"enum"`
		AnyOf []choice `json:"anyOf"`
	} `json:"items"`
}

func readField(name string, raw json.RawMessage) (formField, error) {
	var p property
	if err := json.Unmarshal(raw, &p); err != nil {
		return formField{}, fmt.Errorf("field %q: %w", name, err)
	}
	f := formField{name: name, title: p.Title, desc: p.Description, typ: p.Type}
	if f.title == "" {
		f.title = name
	}
	choices := func(enum, names []string, alt []choice) {
		f.values, f.labels = enum, enum
		if len(names) == len(enum) && len(names) > 0 {
			f.labels = names
		}
		if len(enum) == 0 {
			for _, c := range alt {
				label := c.Title
				if label == "" {
					label = c.Const
				}
				f.values, f.labels = append(f.values, c.Const), append(f.labels, label)
			}
		}
	}
	switch p.Type {
	case "string":
		choices(p.Enum, p.EnumNames, p.OneOf)
	case "number", "integer", "boolean":
	case "array":
		if p.Items == nil {
			return formField{}, fmt.Errorf("field %q: an array without items", name)
		}
		choices(p.Items.Enum, nil, p.Items.AnyOf)
		if len(f.values) == 0 {
			return formField{}, fmt.Errorf("field %q: an array of no choices", name)
		}
	default:
		return formField{}, fmt.Errorf("field %q: type %q is not a form field", name, p.Type)
	}
	return f, nil
}

// question is the field's question for the person: the server's message, then the field.
func (f formField) question(from, message string, fields int) agent.Question {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(message))
	if fields > 1 || f.desc != "" {
		b.WriteString("\n\n**" + f.title + "**")
		if f.desc != "" {
			b.WriteString(": " + f.desc)
		}
	}
	q := agent.Question{From: from, Text: b.String(), Optional: !f.required}
	switch {
	case f.typ == "boolean":
		q.Options = []string{"Yes", "No"}
	case f.typ == "array":
		q.Text += "\n\nReply with one or more of, separated by commas: " + strings.Join(f.labels, ", ")
	case f.typ == "number" || f.typ == "integer":
		q.Text += "\n\nReply with a number."
	default:
		q.Options = f.labels
	}
	return q
}

// value converts an answer to the field's type: an option's label to its value, words to a
// number, yes and no to true and false, a list to the chosen values.
func (f formField) value(text string) (any, error) {
	text = strings.TrimSpace(text)
	pick := func(s string) (string, bool) {
		for i, l := range f.labels {
			if strings.EqualFold(s, l) || strings.EqualFold(s, f.values[i]) {
				return f.values[i], true
			}
		}
		return "", false
	}
	switch f.typ {
	case "boolean":
		switch strings.ToLower(text) {
		case "yes", "true":
			return true, nil
		case "no", "false":
			return false, nil
		}
		return nil, errors.New("answer yes or no")
	case "integer":
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return nil, errors.New("answer with a whole number")
		}
		return n, nil
	case "number":
		n, err := strconv.ParseFloat(text, 64)
		if err != nil || math.IsInf(n, 0) || math.IsNaN(n) {
			return nil, errors.New("answer with a number")
		}
		return n, nil
	case "array":
		out := []string{}
		for part := range strings.SplitSeq(text, ",") {
			if part = strings.TrimSpace(part); part == "" {
				continue
			}
			v, ok := pick(part)
			if !ok {
				return nil, fmt.Errorf("%q is not one of the choices", part)
			}
			out = append(out, v)
		}
		return out, nil
	}
	if len(f.values) > 0 {
		if v, ok := pick(text); ok {
			return v, nil
		}
		return nil, errors.New("answer with one of the choices")
	}
	return text, nil
}

// elicit relays a server's form to the thread of the run whose call is in flight, and
// returns what the person answered, declined or left unanswered.
func (m *Manager) elicit(ctx context.Context, s *mcpServer, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	log := m.log.With("mcp_server", s.cfg.Name)
	call, _ := s.inFlight()
	if call == nil {
		log.Warn("mcp elicitation refused: no call in flight")
		return nil, errNoCall
	}
	log = log.With("run_id", call.runID, "call_id", call.callID, "tool", call.tool)
	p := req.Params
	if p == nil {
		p = &mcp.ElicitParams{}
	}
	decline := func(why string, outcome string) (*mcp.ElicitResult, error) {
		log.Info("mcp elicitation declined", "why", why, "message", truncate(p.Message, 200))
		call.elicited(outcome)
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	if p.Mode == "url" || p.URL != "" {
		// Only form mode is advertised: loopbot sends people to no server's address.
		return decline("url mode", "declined (loopbot relays forms only)")
	}
	fields, err := formFields(p.RequestedSchema)
	if err != nil {
		return decline(err.Error(), "declined (a form loopbot cannot relay: "+err.Error()+")")
	}
	// The person is asked on the call's behalf, until the call ends or the server gives up.
	actx, cancel := context.WithCancelCause(call.ctx)
	defer cancel(nil)
	defer context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })()

	from := "MCP server " + s.cfg.Name
	content := map[string]any{}
	var by string
	for _, f := range fields {
		q := f.question(from, p.Message, len(fields))
		base := q.Text
		var v any
		for try := 1; v == nil; try++ {
			a, err := agent.Ask(actx, q)
			switch {
			case errors.Is(err, agent.ErrNoAsk):
				return decline("nobody to ask", "declined: loopbot could not relay it to the chat here. If the input is needed, ask the user yourself and pass it in the tool's arguments if it takes them")
			case err != nil:
				log.Warn("mcp elicitation not relayed", "err", err)
				call.elicited("not relayed (" + err.Error() + ")")
				return &mcp.ElicitResult{Action: "cancel"}, nil
			}
			switch a.Kind {
			case agent.AnswerSkipped:
				v = skippedField{}
				continue
			case agent.AnswerDeclined:
				log.Info("mcp elicitation declined by the user", "by", a.By)
				call.elicited("declined by " + a.By)
				return &mcp.ElicitResult{Action: "decline"}, nil
			case agent.AnswerCancelled:
				log.Info("mcp elicitation cancelled: not answered")
				call.elicited("not answered")
				return &mcp.ElicitResult{Action: "cancel"}, nil
			}
			by = a.By
			val, err := f.value(a.Text)
			if err != nil && try < maxAnswerTries {
				q.Text = base + "\n\n(" + a.Text + ": " + err.Error() + ".)"
				continue
			}
			if err != nil {
				call.elicited("not answered (" + err.Error() + ")")
				return &mcp.ElicitResult{Action: "cancel"}, nil
			}
			v = val
		}
		if _, ok := v.(skippedField); !ok {
			content[f.name] = v
		}
	}
	log.Info("mcp elicitation answered", "by", by, "fields", len(content))
	call.elicited("answered by " + by)
	return &mcp.ElicitResult{Action: "accept", Content: content}, nil
}

// skippedField marks an optional field the person skipped.
type skippedField struct{}

// elicited records how one of the server's requests for input ended, for the call's note.
func (c *mcpCall) elicited(outcome string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.elicitations = append(c.elicitations, outcome)
}
