package main

import "github.com/loopbot/loopbot/agent"

// corpusLevels are the autonomy levels the corpus runs at.
var corpusLevels = []string{string(agent.LevelCareful), string(agent.LevelBalanced), string(agent.LevelBold)}

// withLevel makes a run work at level, as its channel's setting would.
func withLevel(_ *agent.Config, st *agent.State, level string) {
	st.Autonomy = agent.Level(level)
}
