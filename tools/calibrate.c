#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>
#include <pthread.h>
#include <sched.h>
#include <sys/wait.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
// Context switches, lmbench lat_ctx's method (the costs context_switch and thread_switch; the
// same loops as crates/host/src/calibrate/switch.rs): two tasks pinned to CPU 0 pass a byte
// back and forth over two pipes, each blocking in read until the other writes; their CPU time
// per round trip, less what one thread takes to write and read both pipes itself, halved.
// Build with -pthread; run as root at SCHED_FIFO (chrt -f 1) on a busy machine.
static double cpu(void){struct timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec*1e9+t.tv_nsec;}
static int pa[2],pb[2]; static const long ROUNDS=100000;
static double echo(void){char c;double t=cpu();for(long i=0;i<ROUNDS;i++){if(read(pa[0],&c,1)!=1||write(pb[1],&c,1)!=1)_exit(1);}return cpu()-t;}
static void*echo_thread(void*out){*(double*)out=echo();return 0;}
static double ping(void){char c=0;double t=cpu();for(long i=0;i<ROUNDS;i++){if(write(pa[1],&c,1)!=1||read(pb[0],&c,1)!=1)exit(1);}return cpu()-t;}
static void switches(void){
  cpu_set_t set; CPU_ZERO(&set); CPU_SET(0,&set); sched_setaffinity(0,sizeof set,&set);
  for(int rep=0;rep<5;rep++){
  char c=0; if(pipe(pa)||pipe(pb)) exit(1);
  double t=cpu(); for(long i=0;i<ROUNDS;i++){write(pa[1],&c,1);read(pa[0],&c,1);write(pb[1],&c,1);read(pb[0],&c,1);}
  double pipe_rt=(cpu()-t)/ROUNDS;
  int r[2]; if(pipe(r)) exit(1);
  pid_t child=fork();
  if(child==0){double ns=echo(); write(r[1],&ns,sizeof ns); _exit(0);}
  double mine=ping(), theirs=0; if(read(r[0],&theirs,sizeof theirs)!=sizeof theirs) exit(1); waitpid(child,0,0);
  double procs=(mine+theirs)/ROUNDS;
  pthread_t th; pthread_create(&th,0,echo_thread,&theirs); mine=ping(); pthread_join(th,0);
  double threads=(mine+theirs)/ROUNDS;
  printf("pipe round trip %.0f ns; ping-pong processes %.0f, threads %.0f; context_switch %.0f ns, thread_switch %.0f ns\n",
         pipe_rt,procs,threads,(procs-pipe_rt)/2,(threads-pipe_rt)/2);
  close(pa[0]);close(pa[1]);close(pb[0]);close(pb[1]);close(r[0]);close(r[1]);
  }
}
int main(){
  size_t N=1<<16, sz=N*4096; volatile char sink=0;
  // anon write fault
  for(int rep=0;rep<3;rep++){
  char*p=mmap(0,sz,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0); madvise(p,sz,MADV_NOHUGEPAGE);
  double t0=now(); for(size_t i=0;i<N;i++) p[i*4096]=1; double t1=now();
  printf("anon write fault: %.0f ns\n",(t1-t0)/N);
  munmap(p,sz);
  p=mmap(0,sz,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0); madvise(p,sz,MADV_NOHUGEPAGE);
  t0=now(); for(size_t i=0;i<N;i++) sink+=p[i*4096]; t1=now();
  printf("anon read (zero page) fault: %.0f ns\n",(t1-t0)/N);
  t0=now(); for(size_t i=0;i<N;i++) p[i*4096]=1; t1=now();
  printf("wp fault on zero page (alloc+zero): %.0f ns\n",(t1-t0)/N);
  munmap(p,sz);
  }
  // memset / memcpy 4K
  char*a=aligned_alloc(4096,1<<26),*b=aligned_alloc(4096,1<<26); memset(a,1,1<<26);memset(b,2,1<<26);
  double t0=now(); for(int r=0;r<4;r++) for(size_t i=0;i<(1<<26);i+=4096) memset(a+i,0,4096); double t1=now();
  printf("clear 4KiB (64MiB buffer): %.0f ns\n",(t1-t0)/(4*(1<<14)));
  t0=now(); for(int r=0;r<4;r++) for(size_t i=0;i<(1<<26);i+=4096) memcpy(a+i,b+i,4096); t1=now();
  printf("copy 4KiB (64MiB buffers): %.0f ns\n",(t1-t0)/(4*(1<<14)));
  // file page cache read fault
  int fd=open("/tmp/calib/f",O_RDWR|O_CREAT|O_TRUNC,0644); ftruncate(fd,sz); char*w=mmap(0,sz,PROT_READ|PROT_WRITE,MAP_SHARED,fd,0); for(size_t i=0;i<N;i++) w[i*4096]=1; munmap(w,sz); fsync(fd);
  for(int rep=0;rep<3;rep++){
  char*r=mmap(0,sz,PROT_READ,MAP_PRIVATE,fd,0); madvise(r,sz,MADV_RANDOM); // no faultaround? MADV_RANDOM disables readahead not faultaround
  t0=now(); for(size_t i=0;i<N;i++) sink+=r[i*4096]; t1=now();
  printf("file read fault (cached, random advice): %.0f ns/page\n",(t1-t0)/N);
  munmap(r,sz);
  r=mmap(0,sz,PROT_READ,MAP_PRIVATE,fd,0);
  t0=now(); for(size_t i=0;i<N;i++) sink+=r[i*4096]; t1=now();
  printf("file read fault (cached, default: fault-around): %.0f ns/page\n",(t1-t0)/N);
  munmap(r,sz);
  }
  // syscall
  t0=now(); for(int i=0;i<1000000;i++) getppid(); t1=now(); printf("getppid syscall: %.0f ns\n",(t1-t0)/1e6);
  t0=now(); for(int i=0;i<100000;i++){ void*m=mmap(0,4096,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0); munmap(m,4096);} t1=now(); printf("mmap+munmap 4K: %.0f ns\n",(t1-t0)/1e5);
  switches();
  return sink;
}
