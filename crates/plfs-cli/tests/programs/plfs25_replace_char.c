/*
 * PLFS 2.5's regression helper write_read_error/replace_char.c, rewritten
 * from what it does: through stdio ("r+", getline, fgetpos/fsetpos,
 * fprintf), overwrite one character on a line chosen uniformly at random in
 * a text file in a plfs mount, so that a later verifying read finds exactly
 * one wrong byte. 2.5 seeded rand() with the time and replaced the first
 * occurrence of a random letter a-z on the line (else the line's first
 * character); here the seed is an argument, so the test knows the byte, and
 * the program prints the line, the offset and the two characters. A failed
 * stdio call ends it with exit 1.
 *
 * usage: plfs25_replace_char <file> <character> <seed>   (exit 0: replaced)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fail(const char *what, const char *file)
{
    printf("plfs25_replace_char: FAILED: %s %s\n", what, file);
    perror(what);
    exit(1);
}

int main(int argc, char **argv)
{
    static const char letters[] = "abcdefghijklmnopqrstuvwxyz";
    const char *file;
    char replacement;
    FILE *stream;
    char *line = NULL;
    size_t capacity = 0;
    long lines = 0;
    long chosen = 0;
    fpos_t here, start;
    char wanted;
    long offset;
    int ch;
    int original = -1;

    if (argc != 4 || strlen(argv[2]) != 1) {
        printf("usage: %s <file> <character> <seed>\n", argv[0]);
        return 2;
    }
    file = argv[1];
    replacement = argv[2][0];
    srand((unsigned)strtoul(argv[3], NULL, 10));

    if ((stream = fopen(file, "r+")) == NULL)
        fail("fopen", file);
    if (fgetpos(stream, &here) != 0)
        fail("fgetpos", file);
    start = here;
    /* Reservoir sampling: line n replaces the choice with chance 1/n. */
    while (getline(&line, &capacity, stream) != -1) {
        lines += 1;
        if (rand() % lines == 0) {
            start = here;
            chosen = lines;
        }
        if (fgetpos(stream, &here) != 0)
            fail("fgetpos", file);
    }
    free(line);
    if (ferror(stream))
        fail("getline", file);
    if (lines == 0)
        fail("no lines in", file);

    wanted = letters[rand() % (int)(sizeof letters - 1)];
    if (fsetpos(stream, &start) != 0)
        fail("fsetpos", file);
    here = start;
    /* The first `wanted` on the line, else its first character. */
    while ((ch = fgetc(stream)) != EOF && ch != '\n') {
        if (original < 0)
            original = ch;
        if (ch == wanted) {
            start = here;
            original = ch;
            break;
        }
        if (fgetpos(stream, &here) != 0)
            fail("fgetpos", file);
    }
    if (ferror(stream))
        fail("fgetc", file);
    if (original < 0)
        fail("an empty line in", file);
    if (fsetpos(stream, &start) != 0)
        fail("fsetpos", file);
    if ((offset = ftell(stream)) < 0)
        fail("ftell", file);
    if (fprintf(stream, "%c", replacement) != 1)
        fail("fprintf", file);
    if (fclose(stream) != 0)
        fail("fclose", file);
    printf("plfs25_replace_char: OK: line %ld offset %ld '%c' -> '%c'\n", chosen, offset, original, replacement);
    return 0;
}
