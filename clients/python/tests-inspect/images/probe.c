/* The one program of the exec_remote tests' musl and glibc images (built FROM scratch, since
 * nothing can be pulled): a few applets, chosen by the first argument.
 *   probe cat           copy stdin to stdout as it comes
 *   probe out TEXT      write TEXT to stdout
 *   probe err TEXT      write TEXT to stderr
 *   probe sleep N       sleep N seconds
 *   probe ps            each process's command line, one a line (from /proc)
 *   probe libc          "musl" or "glibc", the C library it was linked against */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int ps(void) {
	DIR *d = opendir("/proc");
	struct dirent *e;
	char path[64], buf[4096];
	if (!d)
		return 1;
	while ((e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
		int fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		ssize_t n = read(fd, buf, sizeof buf - 1);
		close(fd);
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] == 0)
				buf[i] = ' ';
		if (n > 0)
			printf("%s %.*s\n", e->d_name, (int)n, buf);
	}
	closedir(d);
	return 0;
}

int main(int argc, char **argv) {
	if (argc < 2)
		return 2;
	if (!strcmp(argv[1], "cat")) {
		char buf[4096];
		ssize_t n;
		while ((n = read(0, buf, sizeof buf)) > 0)
			if (write(1, buf, n) != n)
				return 1;
		return 0;
	}
	if (!strcmp(argv[1], "out") && argc > 2)
		return write(1, argv[2], strlen(argv[2])) < 0;
	if (!strcmp(argv[1], "err") && argc > 2)
		return write(2, argv[2], strlen(argv[2])) < 0;
	if (!strcmp(argv[1], "sleep") && argc > 2) {
		sleep(atoi(argv[2]));
		return 0;
	}
	if (!strcmp(argv[1], "ps"))
		return ps();
	if (!strcmp(argv[1], "libc")) {
#ifdef __GLIBC__
		puts("glibc");
#else
		puts("musl");
#endif
		return 0;
	}
	return 2;
}
