// rowgate's host for one Edge Function (docs/functions.md): it imports the function's module,
// keeps the handler the module gives `Deno.serve` (or its default export's `fetch`), and
// serves that handler on the Unix socket rowgate names — so a function written for Supabase's
// edge runtime, port and all, runs unchanged behind rowgate's /functions/v1.

type Handler = (request: Request, info?: unknown) => Response | Promise<Response>;

const socket = Deno.env.get("ROWGATE_FUNCTION_SOCKET");
const entry = Deno.env.get("ROWGATE_FUNCTION_ENTRY");
Deno.env.delete("ROWGATE_FUNCTION_SOCKET");
Deno.env.delete("ROWGATE_FUNCTION_ENTRY");
if (!socket || !entry) {
  console.error("rowgate: no socket or entry point given");
  Deno.exit(70);
}

// rowgate holds this process's stdin open while it wants the process: when rowgate stops (or
// is killed), the pipe closes and the process goes with it, never left behind.
(async () => {
  const reader = Deno.stdin.readable.getReader();
  while (!(await reader.read()).done);
  Deno.exit(0);
})();

let handler: Handler | undefined;
const serve = Deno.serve.bind(Deno);
const never = new Promise<void>(() => {});
// deno-lint-ignore no-explicit-any
(Deno as any).serve = (first: any, second?: any) => {
  const given = typeof first === "function" ? first : typeof second === "function" ? second : first?.handler;
  if (typeof given !== "function") throw new TypeError("Deno.serve needs a handler function");
  handler = given;
  return {
    finished: never,
    addr: { transport: "tcp", hostname: "0.0.0.0", port: 8000 },
    shutdown: () => Promise.resolve(),
    ref() {},
    unref() {},
    [Symbol.asyncDispose]: () => Promise.resolve(),
  };
};
// Supabase's runtime lets a function finish work after its answer.
// deno-lint-ignore no-explicit-any
(globalThis as any).EdgeRuntime ??= {
  waitUntil(work: Promise<unknown>) {
    Promise.resolve(work).catch((e) => console.error(e));
  },
};

const module = await import(entry);
if (!handler && typeof module.default?.fetch === "function") {
  handler = (request, info) => module.default.fetch(request, info);
}
if (!handler) {
  console.error("rowgate: the function neither calls Deno.serve nor exports default { fetch }");
  Deno.exit(70);
}
serve({ path: socket, onListen() {} }, handler);
