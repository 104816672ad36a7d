-- The demo schema `rowgate demo` serves on SQLite: the films and directors of the PostgreSQL
-- demo (src/demo.sql), readable by the anonymous caller (demo_rules.toml).
CREATE TABLE directors (
  id INTEGER PRIMARY KEY,
  first_name TEXT NOT NULL,
  last_name TEXT NOT NULL
);

CREATE TABLE films (
  id INTEGER PRIMARY KEY,
  director_id INTEGER REFERENCES directors (id),
  title TEXT NOT NULL,
  year INTEGER NOT NULL,
  rating REAL,
  language TEXT,
  tags JSON NOT NULL DEFAULT '[]',
  released TEXT
);

INSERT INTO directors (first_name, last_name) VALUES
  ('Agnès', 'Varda'), ('Akira', 'Kurosawa'), ('Jane', 'Campion'), ('Wong', 'Kar-wai');

INSERT INTO films (director_id, title, year, rating, language, tags, released) VALUES
  (1, 'Cléo from 5 to 7', 1962, 7.8, 'French', '["drama","paris"]', '1962-04-11'),
  (1, 'The Gleaners and I', 2000, 7.7, 'French', '["documentary"]', '2000-07-05'),
  (2, 'Seven Samurai', 1954, 8.6, 'Japanese', '["action","drama"]', '1954-04-26'),
  (2, 'Ran', 1985, 8.2, 'Japanese', '["drama","war"]', '1985-06-01'),
  (3, 'The Piano', 1993, 7.5, 'English', '["drama","romance"]', '1993-05-19'),
  (3, 'The Power of the Dog', 2021, 6.8, 'English', '["western"]', '2021-11-17'),
  (4, 'In the Mood for Love', 2000, 8.1, 'Cantonese', '["romance"]', '2000-09-29'),
  (4, 'Chungking Express', 1994, 8.0, 'Cantonese', '["romance","comedy"]', '1994-07-14');
