// Package bot is loopbot's domain root: it turns platform-neutral chat events into durable
// agent runs and run events into messages.
//
// # Architecture
//
// Events flow inward and messages flow outward through one path that every platform shares:
//
//	adapters/slack, adapters/discord, adapters/web
//	    decode platform payloads into Event, render Message for the platform,
//	    implement Platform (post, update, ephemeral notice)
//	          |  Event                         ^  Message
//	          v                                |
//	bot   Handle: dedupe, policy, start / continue / decide / cancel  -> Store (one transaction)
//	      run manager: one goroutine per active run, agent.Agent.Run with a checkpoint that
//	          saves the state and the outbox record of what to post in one transaction
//	      dispatcher: reads the outbox, renders cards from the stored state, paces edits per
//	          channel, honours RateLimitError, redacts secrets, calls Platform
//	          |
//	          v
//	agent  the loop: State, Model, Tool, budgets, approvals (knows nothing of chat or disks)
//
// The package defines the interfaces it consumes (Platform, Store) and holds no third-party
// chat, storage or model types. Package store implements Store on bbolt; cmd/loopbot wires
// everything together.
package bot
