// Package agent is loopbot's loop core: one durable, resumable state machine that works on a
// goal by consulting a model after every action.
//
// A run is a State: a plain value that marshals to JSON and holds everything the loop needs,
// so that a run saved by one process is resumed by the next. Agent.Run advances a State step
// by step: it builds a prompt within the context budget, consults the Model with the specs of
// its Tools, and either completes the run (a reply without tool calls is the answer) or
// assesses and runs the calls the model asked for. Calls that need a person leave the run
// awaiting_approval; ask_user and the safety nets (stuck detection, consecutive failures, the
// sanity check) leave it awaiting_input. A Checkpoint hook saves the State before any tool
// runs and after every step, and an Observer sees each transition.
//
// The package knows nothing about chat platforms, storage or a particular model API: those
// live behind the Model and Tool interfaces and in the packages that use this one.
//
// Config is the [agent] section of loopbot's configuration file as it is. Duration is the one
// duration type of every package's Config: text with a unit ("30s", "5m") in the file, never a
// bare number.
package agent
