// Serves the example page and the SDK it imports (sdk/typescript/dist and
// openapi-fetch) on 127.0.0.1, on the port given (0: any), and prints
// `listening <port>`. Usage: node serve.mjs [port]
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { extname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));
const sdk = join(here, "../../sdk/typescript");
const roots = [
  ["/sdk/", join(sdk, "dist")],
  ["/vendor/openapi-fetch/", join(sdk, "node_modules/openapi-fetch/dist")],
  ["/", here],
];
const types = { ".html": "text/html", ".js": "text/javascript", ".mjs": "text/javascript", ".css": "text/css" };

const server = createServer(async (req, res) => {
  let path = decodeURIComponent(new URL(req.url, "http://x").pathname);
  if (path === "/invite/accept") path = "/invite/accept.html"; // the e-mail's link
  if (path === "/reset-password") path = "/reset/reset-password.html"; // the reset e-mail's link
  if (path === "/reset-password.js") path = "/reset/reset-password.js";
  const [prefix, dir] = roots.find(([p]) => path.startsWith(p));
  const rel = normalize(path.slice(prefix.length) || "index.html");
  if (rel.startsWith("..") || rel.includes("node_modules") || rel.startsWith("test")) {
    res.writeHead(404).end();
    return;
  }
  try {
    const body = await readFile(join(dir, rel));
    res.writeHead(200, { "content-type": types[extname(rel)] ?? "application/octet-stream" }).end(body);
  } catch {
    res.writeHead(404).end();
  }
});
server.listen(Number(process.argv[2] ?? 0), "127.0.0.1", () => {
  console.log(`listening ${server.address().port}`);
});
