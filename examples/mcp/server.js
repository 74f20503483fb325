// A small MCP server over stdio: an issue tracker with three issues, for examples/triage_agent.py.
//
//   npm install --prefix examples/mcp
//   condukt run --agent examples.triage_agent:Triage --mcp "node examples/mcp/server.js" "Triage issue 12"
//
// Built on the official TypeScript SDK (@modelcontextprotocol/sdk); it exits when its stdin closes.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const ISSUES = new Map([
  [12, { title: "Crash when the config file is empty", state: "open", body: "condukt.toml with no content: KeyError 'model'." }],
  [14, { title: "Typo in the README", state: "open", body: "'recieve' in the second paragraph." }],
  [15, { title: "Support Python 3.14", state: "closed", body: "Done in 0.4." }],
]);

const server = new McpServer({ name: "issue-tracker", version: "1.0.0" });

server.registerTool(
  "get_issue",
  { description: "An issue of the tracker: its title, state and text.", inputSchema: { number: z.number().int() } },
  async ({ number }) => {
    const issue = ISSUES.get(number);
    if (!issue) {
      return { isError: true, content: [{ type: "text", text: `no issue #${number}` }] };
    }
    return { content: [{ type: "text", text: `#${number} ${issue.title} (${issue.state})\n${issue.body}` }] };
  },
);

server.registerTool(
  "list_issues",
  { description: "The numbers and titles of the issues in a state.", inputSchema: { state: z.enum(["open", "closed"]) } },
  async ({ state }) => {
    const lines = [...ISSUES].filter(([, issue]) => issue.state === state).map(([n, issue]) => `#${n} ${issue.title}`);
    return { content: [{ type: "text", text: lines.join("\n") || "none" }] };
  },
);

await server.connect(new StdioServerTransport());
