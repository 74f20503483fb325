// Runs an AG-UI agent with @ag-ui/client's HttpAgent (its own SSE parser and event verifier), one run per
// line of the plan: {"message": "...", "tools": [...], "toolResult": "..."}; prints the client's messages
// and the event types it received, as JSON, after each run.
import { HttpAgent } from "@ag-ui/client";

const [url, token, planJson] = process.argv.slice(2);
const plan = JSON.parse(planJson);
const agent = new HttpAgent({ url, headers: { Authorization: `Bearer ${token}` }, threadId: "node-thread" });
let counter = 0;
for (const step of plan) {
  if (step.message) agent.addMessage({ id: `u${++counter}`, role: "user", content: step.message });
  if (step.toolResult !== undefined) {
    const last = agent.messages[agent.messages.length - 1];
    for (const call of last.toolCalls ?? [])
      agent.addMessage({ id: `t${++counter}`, role: "tool", toolCallId: call.id, content: step.toolResult });
  }
  const types = [];
  try {
    await agent.runAgent({ tools: step.tools ?? [] }, { onEvent: ({ event }) => { types.push(event.type); } });
    console.log(JSON.stringify({ messages: agent.messages, types }));
  } catch (error) {
    console.log(JSON.stringify({ error: String(error?.message ?? error), types }));
  }
}
