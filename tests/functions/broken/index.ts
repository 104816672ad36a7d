Deno.serve(() => new Response("never" // a syntax error: the process cannot start
