package storetest

import (
	"testing"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// testStateChanges puts one run's state again and again as a run's checkpoints do, and as
// they may not: with messages and calls appended, an earlier one changed in place, the
// lists shortened and emptied. A store may keep the growing lists apart and write only what
// changed, but every read must return exactly the state last put (RunBrief: without its
// messages).
func testStateChanges(t *testing.T, su *suite) {
	s := su.open(t)
	run := fullRun("run-1")
	put := func(step string) {
		t.Helper()
		update(t, s, func(tx bot.Tx) error { return tx.PutRun(run) })
		view(t, s, func(tx bot.Tx) error {
			got, err := tx.Run("run-1")
			if err != nil {
				t.Fatalf("%s: Run: %v", step, err)
			}
			equal(t, step, got, run)
			brief, err := tx.RunBrief("run-1")
			if err != nil {
				t.Fatalf("%s: RunBrief: %v", step, err)
			}
			want := *run
			if run.State != nil {
				st := *run.State
				st.Messages = nil
				want.State = &st
			}
			equal(t, step+", brief", brief, &want)
			return nil
		})
	}
	put("first")

	st := run.State
	st.Messages = append(st.Messages, agent.Message{Role: agent.RoleTool, ToolCallID: "c2", Name: "shell", Content: "deployed"})
	st.Calls = append(st.Calls, agent.CallRecord{ID: "c3", Step: 2, Name: "read_file", Status: agent.CallStarted})
	put("appended")

	st.Messages[0].Content = "an earlier goal, edited"
	st.Calls[1].Status, st.Calls[1].Output = agent.CallSucceeded, "done"
	put("changed in place")

	st.Messages = st.Messages[:2]
	st.Calls = st.Calls[:1]
	put("shortened")

	st.Messages = []agent.Message{}
	st.Calls = nil
	put("emptied")

	st.Messages = append(st.Messages, agent.Message{Role: agent.RoleUser, Content: "again"})
	put("grown again")

	run.State = nil
	put("no state")
}
