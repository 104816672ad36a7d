// What the function was sent: method, path, query, some headers, the body.
import { corsHeaders } from "../_shared/cors.ts"

Deno.serve(async (req) => {
  const url = new URL(req.url)
  const body = await req.text()
  return Response.json({
    method: req.method,
    path: url.pathname,
    search: url.search,
    authorization: req.headers.get("authorization"),
    apikey: req.headers.get("apikey"),
    body,
  }, { headers: corsHeaders })
})
