package main

import (
	"context"
	"fmt"
	"net/url"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm"
)

// modelSet holds the models of the four roles (docs/ARCHITECTURE.md, "Model roles and tool risk").
type modelSet struct {
	executor, summarizer, sanity, planner agent.Model
	// demo is set when no model is configured and the scripted demo model plays instead.
	demo bool
}

// models builds the executor, summarizer, sanity and planner models, each metered, or the demo model
// when no endpoint is configured.
func (s *server) models(ctx context.Context, cfg Config, met *metrics) (modelSet, error) {
	if !cfg.modelConfigured() {
		return modelSet{executor: meteredModel{Model: demoModel{pace: cfg.demoPace}, role: "executor", m: met}, demo: true}, nil
	}
	exec, err := newModel(cfg, cfg.LLM.Model, cfg.LLM.Price)
	if err != nil {
		return modelSet{}, err
	}
	host := endpointHost(cfg.LLM.BaseURL)
	set := modelSet{executor: meteredModel{Model: endpointModel{Model: exec, host: host}, role: "executor", m: met}}
	for _, role := range []struct {
		name string
		rc   RoleConfig
		dst  *agent.Model
	}{{"summarizer", cfg.LLM.Summarizer, &set.summarizer}, {"sanity", cfg.LLM.Sanity, &set.sanity}, {"planner", cfg.LLM.Planner, &set.planner}} {
		m := agent.Model(exec)
		if role.rc.Model != "" {
			if m, err = newModel(cfg, role.rc.Model, role.rc.Price); err != nil {
				return modelSet{}, err
			}
		}
		*role.dst = meteredModel{Model: endpointModel{Model: m, host: host}, role: role.name, m: met}
	}
	return set, nil
}

// newModel builds a client of the [llm] endpoint for model at price.
func newModel(cfg Config, model string, price llm.Price) (*llm.Client, error) {
	c := cfg.LLM.Config
	c.Model, c.Price = model, price
	m, err := llm.New(c)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", model, err)
	}
	return m, nil
}

// pingModel asks the configured executor for one word, which proves the endpoint, the key
// and the model name.
func pingModel(ctx context.Context, cfg Config) error {
	c, err := newModel(cfg, cfg.LLM.Model, cfg.LLM.Price)
	if err != nil {
		return err
	}
	_, err = endpointModel{Model: c, host: endpointHost(cfg.LLM.BaseURL)}.Complete(ctx, agent.Request{MaxTokens: 5, Messages: []agent.Message{{Role: agent.RoleUser, Content: "Reply with the word ok."}}})
	return err
}

// endpointModel names the endpoint's host in the model's errors, so that the log line of a
// failed call says which server failed. The thread shows only the error's safe summary.
type endpointModel struct {
	agent.Model
	host string
}

func (m endpointModel) Complete(ctx context.Context, req agent.Request) (agent.Reply, error) {
	reply, err := m.Model.Complete(ctx, req)
	if err != nil {
		return reply, fmt.Errorf("model endpoint %s: %w", m.host, err)
	}
	return reply, nil
}

// endpointHost is the host (and port) of the base URL, without the user, password, path or
// query that may hold a secret.
func endpointHost(baseURL string) string {
	if baseURL == "" {
		return "api.openai.com"
	}
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" {
		return "(unparsable base_url)"
	}
	return u.Host
}
