// ?spin=1 never yields; otherwise answers at once.
Deno.serve((req) => {
  if (new URL(req.url).searchParams.get("spin") === "1") {
    while (true) { /* runaway */ }
  }
  return new Response("fine")
})
