// Supabase's guide: query the database as the caller, whose row-level security applies.
import { createClient } from "npm:@supabase/supabase-js@2.119.1"

Deno.serve(async (req) => {
  const supabase = createClient(
    Deno.env.get("SUPABASE_URL") ?? "",
    Deno.env.get("SUPABASE_ANON_KEY") ?? "",
    { global: { headers: { Authorization: req.headers.get("Authorization")! } } },
  )
  const { data, error } = await supabase.from("todos").select("task").order("task")
  if (error) return Response.json({ error }, { status: 400 })
  return Response.json(data)
})
