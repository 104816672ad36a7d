// Its process ends on every request.
Deno.serve(() => Deno.exit(1))
