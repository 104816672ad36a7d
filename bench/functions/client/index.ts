// A function that imports supabase-js and makes its client once, as a warm function would.
import { createClient } from "npm:@supabase/supabase-js@2.119.1"

const supabase = createClient(Deno.env.get("SUPABASE_URL") ?? "", Deno.env.get("SUPABASE_ANON_KEY") ?? "", {
  auth: { persistSession: false, autoRefreshToken: false },
})

Deno.serve(() => Response.json({ ok: typeof supabase.from === "function" }))
