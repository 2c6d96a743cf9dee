// What a desktop host does with an .mcpb, with the official @anthropic-ai/mcpb library: unpack
// the bundle into a folder, then resolve the manifest's mcp_config (platform overrides,
// ${__dirname}, ${HOME} and the other system folders, ${user_config.*} from the user's
// answers merged over the manifest's defaults). Prints {"command", "args", "env"} as JSON
// on stdout, or exits 1 with the reason (a required answer missing included).
// Usage: node mcpb_config.mjs BUNDLE.mcpb OUTPUT_DIR '{"notes_folder": "/path"}'
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join, sep } from "node:path";
import { getMcpConfigForManifest, unpackExtension } from "@anthropic-ai/mcpb";

const [bundle, outputDir, answers] = process.argv.slice(2);
if (!(await unpackExtension({ mcpbPath: bundle, outputDir, silent: true }))) {
  console.error(`cannot unpack ${bundle}`);
  process.exit(1);
}
const manifest = JSON.parse(readFileSync(join(outputDir, "manifest.json"), "utf-8"));
const home = homedir();
const config = await getMcpConfigForManifest({
  manifest,
  extensionPath: outputDir,
  systemDirs: {
    HOME: home,
    DESKTOP: join(home, "Desktop"),
    DOCUMENTS: join(home, "Documents"),
    DOWNLOADS: join(home, "Downloads"),
  },
  userConfig: JSON.parse(answers),
  pathSeparator: sep,
  logger: { log: console.error, warn: console.error, error: console.error },
});
if (config === undefined) {
  console.error("no mcp_config: the manifest has none, or a required answer is missing");
  process.exit(1);
}
process.stdout.write(JSON.stringify(config));
